"""Rendering a report's neutral blocks to Markdown and to a self-contained HTML page.

A report is a list of blocks: ``("h", level, text)``, ``("p", spans)``, ``("ul", items)``, ``("code", text)``,
``("fig", name, caption)`` and ``("table", DataFrame)``; a span is plain text or ``("b" | "code", text)``. Both
renderers say the same thing; every piece of text that reaches the HTML goes through :func:`html.escape`, and
figures are embedded as base64 PNG data URIs.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import pandas as pd

__all__ = ["Span", "html_page", "markdown", "markdown_table"]

Span = str | tuple[str, str]  # plain text, or ("b" | "code", text)


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # what a Markdown renderer could read as the start of raw HTML
_ENTITY_START = re.compile(r"&(?=[A-Za-z#])")  # ... or of a character entity


def _md_text(s: str, cell: bool = False) -> str:
    """Text as Markdown shows it, read plain or rendered: "p < 0.05" stays as written; only what a renderer
    would take for HTML (a tag, an entity) is backslash-escaped, and a table cell's ``|``."""
    out = _ENTITY_START.sub(r"\\&", _TAG_START.sub(r"\\<", str(s)))
    return out.replace("|", "\\|") if cell else out


def _md_spans(spans: list[Span]) -> str:
    out = []
    for s in spans:
        if isinstance(s, tuple):
            text = _md_text(s[1])
            out.append(f"**{text.strip()}**" + " " * (text != text.rstrip()) if s[0] == "b" else f"`{s[1]}`")
        else:
            out.append(_md_text(s))
    return "".join(out)


def markdown(blocks: list[tuple]) -> str:
    out = []
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            out.append("#" * blk[1] + " " + _md_text(blk[2]))
        elif kind == "p":
            out.append(_md_spans(blk[1]))
        elif kind == "ul":
            out.append("\n".join(f"- {_md_text(x)}" for x in blk[1]))
        elif kind == "code":
            out.append(f"```\n{blk[1]}\n```")
        elif kind == "fig":
            out.append(f"![{_md_text(blk[2])}]({blk[1]}.png)\n\n*{_md_text(blk[2])}*")
        elif kind == "table":
            out.append(markdown_table(blk[1]))
    return "\n\n".join(out) + "\n"


def markdown_table(t: pd.DataFrame) -> str:
    if t.empty:
        return "*(no rows)*"
    head = "| " + " | ".join(_md_text(c, cell=True) for c in t.columns) + " |"
    rule = "|" + "|".join("---" for _ in t.columns) + "|"
    body = [
        "| " + " | ".join(_md_text(v, cell=True) for v in row) + " |"
        for row in t.astype(str).itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.45;"
    "color:#222}table{border-collapse:collapse;margin:1em 0;font-size:.85em}td,th{border:1px solid #ccc;"
    "padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f3f3f3}img{max-width:100%;"
    "border:1px solid #eee}figcaption{font-size:.9em;color:#555}pre{background:#f6f6f6;padding:.8em;"
    "overflow-x:auto}code{background:#f6f6f6;padding:0 .2em}"
)


def _html_spans(spans: list[Span]) -> str:
    e = html.escape
    out = []
    for s in spans:
        if isinstance(s, tuple):
            out.append(f"<strong>{e(s[1])}</strong>" if s[0] == "b" else f"<code>{e(s[1])}</code>")
        else:
            out.append(e(str(s)))
    return "".join(out)


def html_page(blocks: list[tuple], title: str, fig_dir: Path) -> str:
    e = html.escape
    out = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}</title>"]
    out.append(f"<style>{_CSS}</style></head><body>")
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            out.append(f"<h{blk[1]}>{e(blk[2])}</h{blk[1]}>")
        elif kind == "p":
            out.append(f"<p>{_html_spans(blk[1])}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in blk[1]) + "</ul>")
        elif kind == "code":
            out.append(f"<pre><code>{e(blk[1])}</code></pre>")
        elif kind == "fig":
            data = base64.b64encode((fig_dir / f"{blk[1]}.png").read_bytes()).decode("ascii")
            out.append(
                f"<figure><img alt='{e(blk[2])}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{e(blk[2])}</figcaption></figure>"
            )
        elif kind == "table":
            t = blk[1]
            head = "".join(f"<th>{e(str(c))}</th>" for c in t.columns)
            rows = "".join(
                "<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in r) + "</tr>"
                for r in t.itertuples(index=False)
            )
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    out.append("</body></html>")
    return "\n".join(out)
