"""Spec keys declared once: a dataclass field that carries its default, its documentation, limits and choices.

A study spec's tables are frozen dataclasses (``[space]`` is :class:`explorer.layout._space_spec.SpaceSpec`,
``[latency]`` :class:`explorer.layout._config.LatencyConfig`, ...). Each field that is a key of the spec is made
with :func:`key`; the generic reader (:func:`explorer.spec._toml.read_table`), the key list
(:mod:`explorer.spec._keys`), the reference in docs/spec.md and the defaults of ``explorer train`` and
``explorer space`` all read these fields, so none of them holds a copy that could disagree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from explorer.limits import Limit

__all__ = ["KEY", "REQUIRED", "Key", "default_of", "key", "key_of", "option_default", "spec_fields"]

KEY = "spec_key"  # the metadata entry of a field that is a spec key: its Key
REQUIRED: Any = dataclasses.MISSING  # a key without a default must be given


@dataclasses.dataclass(frozen=True)
class Key:
    """What a spec key is besides its name and default: documentation, limits and choices.

    ``lo``/``hi`` bound a number (``lo <= value < hi``) or an integer (``lo <= value``); a number without
    either must be > 0. ``shown`` is the default as docs/spec.md writes it where the value alone does not say it
    (a default the reader works out, such as the families a space can realise). ``table`` marks a key that is
    a table of its own (documented in its own section); ``scalar`` lets a list key take one value alone
    (``min_dk = 16`` for ``[16]``); ``cap`` is the size limit (:mod:`explorer.limits`) on its value, or on
    each value of its list, checked before the spec is read (:mod:`explorer.spec._size_checks`)."""

    doc: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] | None = None
    shown: str | None = None
    table: bool = False
    scalar: bool = False
    expected: str | None = None  # what a wrong value is told it must be, where the type alone says too little
    cap: Limit | None = None  # the size limit on the value (each value of a list), checked before it is read


def key(
    default: Any = REQUIRED,
    doc: str = "",
    *,
    factory: Callable[[], Any] | None = None,
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[str, ...] | None = None,
    shown: str | None = None,
    table: bool = False,
    scalar: bool = False,
    expected: str | None = None,
    cap: Limit | None = None,
) -> Any:
    """A dataclass field that is a spec key: ``default`` (or ``factory``; neither: required) and ``doc``, the
    one line docs/spec.md shows for it."""
    meta = {
        KEY: Key(
            doc,
            lo=lo,
            hi=hi,
            choices=choices,
            shown=shown,
            table=table,
            scalar=scalar,
            expected=expected,
            cap=cap,
        )
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def key_of(field: dataclasses.Field[Any]) -> Key:
    """The :class:`Key` of a field made by :func:`key`."""
    return field.metadata[KEY]


def spec_fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of ``cls`` that are spec keys, in declaration order (the order the docs list them in)."""
    return tuple(f for f in dataclasses.fields(cls) if KEY in f.metadata)


def default_of(field: dataclasses.Field[Any]) -> Any:
    """The field's default value (REQUIRED where it has none)."""
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def option_default(cls: type, name: str) -> Any:
    """The default of the key ``name`` of ``cls`` as a command-line option takes it: one value where the spec
    lists values (``min_dk = [1]`` is ``--min-dk 1``). A command option that is also a spec key takes its
    default from here, so the command, the spec and docs/spec.md agree."""
    field = next(f for f in spec_fields(cls) if f.name == name)
    value = default_of(field)
    if value is REQUIRED:
        raise ValueError(f"the spec key {name!r} of {cls.__name__} is required; it has no default to give")
    return value[0] if isinstance(value, tuple) and len(value) == 1 else value
