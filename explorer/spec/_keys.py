"""Every key a study spec may hold, by table, derived from the fields of :class:`StudySpec` and its tables.

The generic reader (:func:`explorer.spec._toml.read_table`) accepts exactly these keys, refusing any other
with a line naming it, the nearest allowed key and the allowed ones; the key tables of docs/spec.md are written
from the same fields (:mod:`explorer.spec._docs`), so neither can drift from the code.
"""

from __future__ import annotations

import dataclasses
import typing

from explorer.fields import key_of, spec_fields
from explorer.spec._study_spec import StudySpec
from explorer.spec._toml import table_keys


def _table_classes() -> dict[str, type]:
    """Each table of the spec (by its key) -> the dataclass it is read into."""
    hints = typing.get_type_hints(StudySpec)
    out: dict[str, type] = {}
    for f in spec_fields(StudySpec):
        if key_of(f).table:
            kinds = typing.get_args(hints[f.name]) or (hints[f.name],)  # DecodeConfig | None: DecodeConfig
            out[f.name] = next(c for c in kinds if isinstance(c, type) and dataclasses.is_dataclass(c))
    return out


TABLE_CLASSES: dict[str, type] = _table_classes()
TABLES: tuple[str, ...] = tuple(TABLE_CLASSES)
SPEC_KEYS: dict[str, tuple[str, ...]] = {
    "": table_keys(StudySpec),
    **{name: table_keys(cls) for name, cls in TABLE_CLASSES.items()},
}
