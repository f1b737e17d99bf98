"""docs/spec.md's key tables, written from the fields that declare the keys (:mod:`explorer.fields`).

Each table of the reference sits between two markers, ``<!-- keys of TABLE -->`` and ``<!-- end of keys -->``;
:func:`spec_reference` rewrites what lies between them and leaves the prose around them as it is. After changing a
key's field, regenerate the page with ``python -m explorer.spec._docs`` (it rewrites docs/spec.md in place);
``tests/test_docs.py`` fails while the committed page differs from what the fields give.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

from explorer.fields import REQUIRED, default_of, key_of, spec_fields
from explorer.spec._keys import TABLE_CLASSES
from explorer.spec._study_spec import StudySpec

TOP_LEVEL = "top level"  # the marker's name for the spec's top-level keys
_REGION = re.compile(
    r"(<!-- keys of (?P<table>top level|\[\w+\]) -->\n).*?(<!-- end of keys -->)", flags=re.S
)


def shown_default(field: dataclasses.Field[Any]) -> str:
    """The default of a key as the reference writes it: ``**required**``, ``none``, or the TOML value."""
    spec = key_of(field)
    if spec.shown is not None:
        return spec.shown
    value = default_of(field)
    if value is REQUIRED:
        return "**required**"
    if value is None:
        return "none"
    if spec.scalar and isinstance(value, tuple) and len(value) == 1:
        value = value[0]  # a key that takes one value alone shows it alone
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, float):
        return f"`{value!r}`"
    return f"`{json.dumps(value)}`"


def key_table(cls: type) -> str:
    """The markdown table of the keys ``cls`` declares: key, default, meaning (tables of their own left out)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for field in spec_fields(cls):
        if not key_of(field).table:
            rows.append(f"| `{field.name}` | {shown_default(field)} | {key_of(field).doc} |")
    return "\n".join(rows) + "\n"


def spec_reference(text: str) -> str:
    """``text`` (docs/spec.md) with every marked key table rewritten from the fields; an unknown table named by
    a marker is a KeyError."""
    classes = {TOP_LEVEL: StudySpec, **{f"[{name}]": cls for name, cls in TABLE_CLASSES.items()}}

    def table(match: re.Match[str]) -> str:
        return match.group(1) + key_table(classes[match.group("table")]) + match.group(3)

    return _REGION.sub(table, text)


def marked_tables(text: str) -> list[str]:
    """The tables ``text`` marks as generated, in order."""
    return [m.group("table") for m in _REGION.finditer(text)]


if __name__ == "__main__":  # python -m explorer.spec._docs [PATH]: rewrite the reference in place
    page = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/spec.md")
    page.write_text(spec_reference(page.read_text()))
