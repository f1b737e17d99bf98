"""Rendering a report's neutral blocks to Markdown and to a self-contained HTML page.

A report is a list of :data:`Block`: :class:`Heading`, :class:`Para` (of spans), :class:`Bullets`,
:class:`Code`, :class:`Figure` and :class:`Table`; a span is plain text, :class:`Bold` or :class:`Code` (inline
there). Both renderers say the same thing; every piece of text that reaches the HTML goes through
:func:`html.escape`, and figures are embedded as base64 PNG data URIs.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Bold:
    """Bold text in a paragraph."""

    text: str


@dataclass(frozen=True)
class Code:
    """Code: a fenced block among blocks, inline in a paragraph."""

    text: str


Span = str | Bold | Code  # a piece of a paragraph


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Para:
    spans: list[Span]


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Figure:
    """The figure ``NAME.png`` of the report's folder, with its caption."""

    name: str
    caption: str


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame


Block = Heading | Para | Bullets | Code | Figure | Table


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
        if isinstance(s, Bold):
            text = _md_text(s.text)
            out.append(f"**{text.strip()}**" + " " * (text != text.rstrip()))
        elif isinstance(s, Code):
            out.append(f"`{s.text}`")
        else:
            out.append(_md_text(s))
    return "".join(out)


def markdown(blocks: list[Block]) -> str:
    out = []
    for blk in blocks:
        if isinstance(blk, Heading):
            out.append("#" * blk.level + " " + _md_text(blk.text))
        elif isinstance(blk, Para):
            out.append(_md_spans(blk.spans))
        elif isinstance(blk, Bullets):
            out.append("\n".join(f"- {_md_text(x)}" for x in blk.items))
        elif isinstance(blk, Code):
            out.append(f"```\n{blk.text}\n```")
        elif isinstance(blk, Figure):
            out.append(f"![{_md_text(blk.caption)}]({blk.name}.png)\n\n*{_md_text(blk.caption)}*")
        elif isinstance(blk, Table):
            out.append(markdown_table(blk.frame))
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
        if isinstance(s, Bold):
            out.append(f"<strong>{e(s.text)}</strong>")
        elif isinstance(s, Code):
            out.append(f"<code>{e(s.text)}</code>")
        else:
            out.append(e(str(s)))
    return "".join(out)


def html_page(blocks: list[Block], title: str, fig_dir: Path) -> str:
    e = html.escape
    out = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}</title>"]
    out.append(f"<style>{_CSS}</style></head><body>")
    for blk in blocks:
        if isinstance(blk, Heading):
            out.append(f"<h{blk.level}>{e(blk.text)}</h{blk.level}>")
        elif isinstance(blk, Para):
            out.append(f"<p>{_html_spans(blk.spans)}</p>")
        elif isinstance(blk, Bullets):
            out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in blk.items) + "</ul>")
        elif isinstance(blk, Code):
            out.append(f"<pre><code>{e(blk.text)}</code></pre>")
        elif isinstance(blk, Figure):
            data = base64.b64encode((fig_dir / f"{blk.name}.png").read_bytes()).decode("ascii")
            out.append(
                f"<figure><img alt='{e(blk.caption)}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{e(blk.caption)}</figcaption></figure>"
            )
        elif isinstance(blk, Table):
            t = blk.frame
            head = "".join(f"<th>{e(str(c))}</th>" for c in t.columns)
            rows = "".join(
                "<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in r) + "</tr>"
                for r in t.itertuples(index=False)
            )
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    out.append("</body></html>")
    return "\n".join(out)
