"""Reading one TOML table strictly: unknown keys refused up front, typed values read with one-line errors.

:func:`read_table` reads a table into its dataclass, each key by what its field declares
(:func:`explorer.fields.key`: type, default, limits, choices); :class:`Table` holds the typed reads it
uses, which the spec readers also call for the few keys a field cannot describe alone. Each error is a
:class:`SpecError` naming the key, its table, what was expected and what was found; an unknown key is named with
the nearest allowed one.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeGuard, TypeVar

from explorer.errors import SpecError
from explorer.fields import default_of, key_of, spec_fields

T = TypeVar("T")


MISSING = object()


def kind(value: Any) -> str:
    """A reader-facing name for a TOML value's type."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", dict: "a table"}
    if isinstance(value, list):
        return "a list"
    return names.get(type(value), type(value).__name__)


def is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_list(v: Any, item_ok: Callable[[Any], bool]) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(item_ok(x) for x in v)


class Table:
    """One TOML table being read: rejects unknown keys up front and reads typed values with clear errors."""

    def __init__(self, data: Any, where: str, allowed: tuple[str, ...]):
        self.where = where
        if not isinstance(data, dict):
            raise SpecError(f"{where} must be a table, got {kind(data)}; write it as [{where.strip('[]')}].")
        unknown = [k for k in data if k not in allowed]
        if unknown:
            near = difflib.get_close_matches(str(unknown[0]), allowed, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise SpecError(
                f"unknown key {unknown[0]!r} in {where}; {hint}the allowed keys are {', '.join(allowed)}."
            )
        self.data = data

    def fail(self, key: str, expected: str, value: Any) -> SpecError:
        return SpecError(f"{key!r} in {self.where} must be {expected}, got {kind(value)} ({value!r}).")

    def raw(self, key: str, default: Any = MISSING) -> Any:
        if key in self.data:
            return self.data[key]
        if default is MISSING:
            raise SpecError(
                f"{self.where} is missing the required key {key!r}; add it (see studies/quickstart.toml)."
            )
        return default

    def get(self, key: str, default: Any, ok: Callable[[Any], bool], expected: str) -> Any:
        """The value at ``key`` if ``ok`` accepts it, ``default`` if absent (required if no default)."""
        if key not in self.data:
            return self.raw(key, default)
        if not ok(self.data[key]):
            raise self.fail(key, expected, self.data[key])
        return self.data[key]

    def integer(self, key: str, default: Any = MISSING, low: int = 1) -> Any:
        return self.get(key, default, lambda v: is_int(v) and v >= low, f"an integer >= {low}")

    def number(self, key: str, default: Any = MISSING, low: float = 0.0, high: float = math.inf) -> Any:
        """A number in ``[low, high)``, as a float."""
        span = f"in [{low:g}, {high:g})" if high < math.inf else f">= {low:g}"
        value = self.get(key, default, lambda v: is_number(v) and low <= v < high, f"a number {span}")
        return None if value is None else float(value)

    def positive(self, key: str, default: Any = MISSING) -> Any:
        value = self.get(key, default, lambda v: is_number(v) and 0 < v < math.inf, "a number > 0")
        return None if value is None else float(value)

    def text(self, key: str, default: Any = MISSING, choices: tuple[str, ...] | None = None) -> Any:
        value = self.get(key, default, lambda v: isinstance(v, str) and v != "", "a non-empty string")
        if choices is not None and key in self.data and value not in choices:
            raise SpecError(f"{key!r} in {self.where} is {value!r}; choose one of {', '.join(choices)}.")
        return value

    def flag(self, key: str, default: Any = MISSING) -> Any:
        return self.get(key, default, lambda v: isinstance(v, bool), "true or false")

    def integers(self, key: str, default: Any = MISSING, scalar_ok: bool = False) -> Any:
        """A non-empty list of distinct integers >= 1, sorted ascending (or one integer, if ``scalar_ok``)."""
        if scalar_ok and is_int(self.data.get(key)):
            return self.distinct(key, [self.integer(key)])
        expected = "an integer >= 1 or a list of them" if scalar_ok else "a non-empty list of integers >= 1"
        value = self.get(key, default, lambda v: is_list(v, lambda x: is_int(x) and x >= 1), expected)
        return value if key not in self.data else self.distinct(key, value)

    def numbers(self, key: str, default: Any = MISSING) -> Any:
        """A non-empty list of distinct numbers > 0, sorted ascending, as floats."""
        ok = lambda v: is_list(v, lambda x: is_number(x) and 0 < x < math.inf)  # noqa: E731
        value = self.get(key, default, ok, "a non-empty list of numbers > 0")
        return value if key not in self.data else self.distinct(key, [float(v) for v in value])

    def distinct(self, key: str, values: list[Any]) -> tuple[Any, ...]:
        twice = sorted(v for v, n in Counter(values).items() if n > 1)
        if twice:
            raise SpecError(
                f"{key!r} in {self.where} lists {twice[0]!r} more than once; list each value once."
            )
        return tuple(sorted(values))


def table_keys(cls: type) -> tuple[str, ...]:
    """The keys of the spec table ``cls`` declares, in declaration order."""
    return tuple(f.name for f in spec_fields(cls))


def read_table(cls: type[T], data: Any, where: str, **given: Any) -> T:
    """The spec table ``data`` read into the dataclass ``cls``: unknown keys refused, each key checked by its
    field's type, limits and choices, absent keys taking the field's default. ``given`` supplies the values of
    keys the caller reads itself (a rule a field cannot declare); cross-field rules are the caller's, after."""
    t = Table(data, where, table_keys(cls))
    values = {f.name: given[f.name] if f.name in given else read_value(t, f) for f in spec_fields(cls)}
    return cls(**values)


def read_value(t: Table, field: dataclasses.Field[Any]) -> Any:
    """The value of one key of ``t``, read as its field declares (a number without limits must be > 0)."""
    spec, name, default = key_of(field), field.name, default_of(field)
    default = MISSING if default is dataclasses.MISSING else default
    typ = str(field.type).replace(" | None", "")
    if typ == "bool":
        return t.flag(name, default)
    if typ == "int":
        return t.integer(name, default, low=1 if spec.lo is None else int(spec.lo))
    if typ == "float":
        if spec.lo is None and spec.hi is None:
            return t.positive(name, default)
        return t.number(name, default, low=spec.lo or 0.0, high=math.inf if spec.hi is None else spec.hi)
    if typ == "str":
        return t.text(name, default, choices=spec.choices)
    if typ == "tuple[int, ...]":
        return t.integers(name, default, scalar_ok=spec.scalar)
    if typ == "tuple[float, ...]":
        return t.numbers(name, default)
    if typ == "dict[str, Any]":
        return dict(t.get(name, default, lambda v: isinstance(v, dict), spec.expected or "a table"))
    raise TypeError(f"{field.name}: no reader for a spec key of type {typ}; read it in the table's reader")
