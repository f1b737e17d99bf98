"""Spec values given on the command line (``--set TABLE.KEY=VALUE``), and where each value of a spec came from.

An override names one key of the spec's key list (:data:`explorer.spec._keys.SPEC_KEYS`) with a dotted
path (``sampler``, ``space.heads``, ``task.options.n_relations``) and gives its value in TOML (``[1, 2, 4]``,
``3``, ``0.5``, ``true``, ``"text"``; a bare word such as ``random`` is read as a string). Overrides are applied
to the parsed TOML document before it is read, so the spec reader checks them exactly as it checks the file.
An unknown table or key is one line naming the allowed ones.

:func:`key_sources` says, for every key a document sets, whether the file or an override gave it; every other
key of the resolved spec took its default (:func:`spec_rows` lists them all, for ``explorer spec show``).
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from explorer.errors import SpecError
from explorer.spec._keys import SPEC_KEYS, TABLES
from explorer.storage import mask_url

# read as a string when it is not TOML: random, data.py:load, ./data.npz, http://127.0.0.1:5000
_BARE_WORD = re.compile(r"^[A-Za-z_./~][^\s\"'\[\]{},]*$")
SOURCES_ATTR = "spec_sources"  # the study attribute: {dotted key: "file" | "override"}
_TOP_KEYS = tuple(k for k in SPEC_KEYS[""] if k not in TABLES)


@dataclass(frozen=True)
class Override:
    """One ``--set KEY=VALUE``: the key's path in the spec document, its value, and the text as given."""

    path: tuple[str, ...]
    value: Any
    text: str

    @property
    def key(self) -> str:
        """The key as :func:`key_sources` names it (a task option counts as ``task.options``)."""
        return ".".join(self.path[:2])


def _toml_value(raw: str, shown: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        doc = tomllib.loads(f"value = {raw}")
    except tomllib.TOMLDecodeError:
        doc = None
    if doc is not None and list(doc) == ["value"]:
        return doc["value"]
    if _BARE_WORD.match(raw):
        return raw
    raise SpecError(
        f"--set {shown}: {mask_url(raw)!r} is not a TOML value; write e.g. [1, 2, 4], 3, 0.5, true or '\"text\"'."
    )


def parse_override(text: str) -> Override:
    """Read one ``KEY=VALUE``; an unknown key or a value that is not TOML is one :class:`SpecError` line."""
    shown = mask_url(text)  # a storage URL given with --set may hold a password
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key or not raw:
        raise SpecError(f"--set {shown} is not KEY=VALUE; write e.g. --set finalists.folds=3.")
    path = tuple(key.split("."))
    tables = ", ".join(TABLES)
    if len(path) == 1:
        if path[0] in TABLES:
            raise SpecError(
                f"--set {shown} sets the whole [{path[0]}] table; set one key, e.g. --set "
                f"{path[0]}.{SPEC_KEYS[path[0]][0]}=..., the keys of [{path[0]}] being {', '.join(SPEC_KEYS[path[0]])}."
            )
        if path[0] not in _TOP_KEYS:
            raise SpecError(
                f"unknown key {path[0]!r} in --set {shown}; the top-level keys are {', '.join(_TOP_KEYS)}, "
                f"and TABLE.KEY sets a key of one of the tables {tables}."
            )
    elif path[0] not in TABLES:
        raise SpecError(f"unknown table {path[0]!r} in --set {shown}; the tables are {tables}.")
    elif path[1] not in SPEC_KEYS[path[0]]:
        raise SpecError(
            f"unknown key {path[1]!r} in [{path[0]}] (--set {shown}); the keys of [{path[0]}] are "
            f"{', '.join(SPEC_KEYS[path[0]])}."
        )
    elif len(path) > 2 and path[:2] != ("task", "options") or len(path) > 3 or "" in path:
        raise SpecError(
            f"--set {shown} goes deeper than TABLE.KEY; only task options take a third part "
            "(--set task.options.n_relations=4)."
        )
    return Override(path, _toml_value(raw, shown), text)


def apply_overrides(document: Mapping[str, Any], overrides: Iterable[Override]) -> dict[str, Any]:
    """A copy of a parsed spec document with every override written in (a later one wins over an earlier)."""
    doc = copy.deepcopy(dict(document))
    for o in overrides:
        node = doc
        for part in o.path[:-1]:
            node = node.setdefault(part, {})  # a table the file leaves out is added
            if not isinstance(node, dict):
                raise SpecError(f"--set {mask_url(o.text)}: {part} in the file is not a table; fix the file.")
        node[o.path[-1]] = o.value
    return doc


def key_sources(document: Mapping[str, Any], overrides: Iterable[Override] = ()) -> dict[str, str]:
    """``{dotted key: "file" | "override"}`` for every key the document or an override sets."""
    out: dict[str, str] = {}
    for key, value in document.items():
        if key in TABLES and isinstance(value, Mapping):
            out.update({f"{key}.{k}": "file" for k in value})
        else:
            out[key] = "file"
    out.update({o.key: "override" for o in overrides})
    return out


class SpecRow(TypedDict):
    """One key of :func:`spec_rows`: its dotted name, its resolved value (None: unset) and where it came from."""

    key: str
    value: Any
    source: str


def spec_rows(resolved: Mapping[str, Any], sources: Mapping[str, str] | None) -> list[SpecRow]:
    """Every key of the spec key list in order, with its resolved value (None: unset) and where it came from
    (``sources`` as :func:`key_sources` gives them, every other key ``default``; None: ``stored`` for all)."""
    rows: list[SpecRow] = []
    for table, keys in SPEC_KEYS.items():
        for key in keys:
            if not table and key in TABLES:
                continue
            dotted = f"{table}.{key}" if table else key
            values = (resolved.get(table) or {}) if table else resolved
            # file, override or default; stored: a study created before explorer recorded where values came from
            source = "stored" if sources is None else sources.get(dotted, "default")
            rows.append({"key": dotted, "value": values.get(key), "source": source})
    return rows
