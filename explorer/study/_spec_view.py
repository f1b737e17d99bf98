"""A spec as a run sees it, every default filled in and each value's source: ``explorer spec show``.

From a spec file (with any ``--set`` overrides, checked as ``study run`` checks them) or from a stored study,
opened read-only: nothing is created or changed. A study created before explorer recorded where its values came
from shows every source as ``stored``, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from explorer.errors import ConfigError
from explorer.spec import SOURCES_ATTR, load_spec, spec_rows
from explorer.storage import mask_url
from explorer.study._catalog import read_study

__all__ = ["is_spec_file", "resolved_spec"]


def is_spec_file(target: str) -> bool:
    """Whether ``spec show``'s argument names a spec file (a path ending in .toml, or any existing file) rather
    than a stored study."""
    return target.endswith(".toml") or Path(target).is_file()


def resolved_spec(target: str, storage: str | None = None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The resolved spec of a file or a stored study, JSON-ready: ``keys`` lists every key with its value and
    source (file, override, default; stored for a study that did not record them), ``spec`` is the whole
    resolved spec (a storage URL's password masked)."""
    if is_spec_file(target):
        spec = load_spec(target, overrides)
        sources: dict[str, str] | None = dict(spec.origin)
        where: dict[str, Any] = {"file": target}
    else:
        if overrides:
            raise ConfigError(
                f"--set changes a spec file, and {target!r} names a stored study; give the spec file instead "
                "(a stored study's spec is fixed when it is created)."
            )
        study, spec, url = read_study(target, storage)
        sources = study.user_attrs.get(SOURCES_ATTR)
        where = {"study": target, "storage": mask_url(url)}
    resolved = spec.to_dict()
    if "storage" in resolved:
        resolved["storage"] = mask_url(resolved["storage"])
    return {
        "name": spec.name,
        "from": where,
        "overrides": [mask_url(o) for o in overrides],
        "sources_recorded": sources is not None,
        "keys": spec_rows(resolved, sources),
        "spec": resolved,
    }
