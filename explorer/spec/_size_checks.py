"""A study spec's sizes against explorer.limits, at the door: before the spec's space is worked out.

:func:`check_raw` reads the parsed TOML document itself, so a ``d_model = [10**18]`` or a list of 100,000 head
counts is refused before any head rule runs on it (values of the wrong type are left to the strict reader, which
names them); :func:`check_layouts` counts the architectures the checked space expands to
(explorer.layout._counting) without listing them. Which key has which limit is declared on its field (the ``cap`` of
:func:`explorer.fields.key`). A spec read back from a study's storage is not checked again:
it was accepted when the study was created, perhaps under raised limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.errors import SpecError
from explorer.fields import key_of, spec_fields
from explorer.layout import SpaceSpec, count_layouts
from explorer.limits import CANDIDATES, LAYOUTS, MLP_WIDTH, RUN_TIME_S, Limit
from explorer.spec._keys import TABLE_CLASSES
from explorer.spec._study_spec import StudySpec
from explorer.spec._toml import is_int, is_number


def _caps(cls: type) -> dict[str, Limit]:
    return {f.name: cap for f in spec_fields(cls) if (cap := key_of(f).cap) is not None}


# table (None: the top level) -> key -> the limit on its value (or on each value of its list): the fields' caps
SPEC_LIMITS: dict[str | None, dict[str, Limit]] = {
    None: _caps(StudySpec),
    **{table: caps for table, cls in TABLE_CLASSES.items() if (caps := _caps(cls))},
}


def _where(table: str | None, key: str) -> str:
    return f"{key!r} at the top level" if table is None else f"{key!r} in [{table}]"


def check_raw(data: Mapping[str, Any]) -> None:
    """Every sized value of a parsed spec document within its limit, and every list of values within
    ``CANDIDATES``; a LimitError names the key and its table."""
    if not isinstance(data, Mapping):
        return
    for table, keys in SPEC_LIMITS.items():
        section = data if table is None else data.get(table)
        if not isinstance(section, Mapping):
            continue
        for key, limit in keys.items():
            value = section.get(key)
            where = _where(table, key)
            if isinstance(value, list):
                CANDIDATES.check(len(value), f"the list {where} (its length)", "list fewer values")
                values = value
            else:
                values = [value]
            for v in values:
                if is_int(v) or (limit is RUN_TIME_S and is_number(v)):
                    limit.check(v, where)
    space = data.get("space")
    if isinstance(space, Mapping):
        for key in ("mlp_ratio", "families"):
            if isinstance(space.get(key), list):
                where = f"the list {_where('space', key)} (its length)"
                CANDIDATES.check(len(space[key]), where, "list fewer values")
        widths = [d for d in _values(space.get("d_model")) if is_int(d)]
        for ratio in _values(space.get("mlp_ratio")):
            if is_number(ratio) and widths and ratio > 0:
                width = float(ratio) * max(widths)
                MLP_WIDTH.check(
                    width, "the MLP width (mlp_ratio x d_model) in [space]", "choose a smaller mlp_ratio"
                )
    seed = data.get("seed")
    if is_int(seed) and not 0 <= seed < 2**31:
        raise SpecError(f"'seed' at the top level is {seed}; seeds run from 0 to 2**31 - 1.")


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def check_layouts(space: SpaceSpec) -> int:
    """The number of architectures ``space`` expands to, if within ``LAYOUTS``."""
    n = count_layouts(space)
    LAYOUTS.check(
        n,
        "the search space ([space]) counted in architectures",
        "list fewer head counts, layers, key/value heads or families",
    )
    return n
