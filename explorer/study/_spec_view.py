"""A spec as a run sees it, every default filled in and each value's source: ``explorer spec show``.

From a spec file (with any ``--set`` overrides, checked as ``study run`` checks them) or from a stored study,
opened read-only: nothing is created or changed. A study created before explorer recorded where its values came
from shows every source as ``stored``, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from explorer.errors import ConfigError
from explorer.spec import SOURCES_ATTR, StudySpec, load_spec, spec_rows
from explorer.storage import mask_url, resolve_storage_url
from explorer.study._artifacts import absolute_location, artifact_root_for
from explorer.study._study import Study
from explorer.study._user_code_check import INPUT_ATTR

DERIVED = "derived"  # the source of an unset key shown as a run works it out from the others


def is_spec_file(target: str) -> bool:
    """Whether ``spec show``'s argument names a spec file (a path ending in .toml, or any existing file) rather
    than a stored study."""
    return target.endswith(".toml") or Path(target).is_file()


def resolved_spec(target: str, storage: str | None = None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The resolved spec of a file or a stored study, JSON-ready: ``keys`` lists every key with its value and
    source (file, override, default; stored for a study that did not record them; derived for an unset key
    shown as the run works it out: :func:`_derived`), ``spec`` is the whole resolved spec (a storage URL's
    password masked)."""
    task_input = None
    if is_spec_file(target):
        spec = load_spec(target, overrides)
        sources: dict[str, str] | None = dict(spec.origin)
        where: dict[str, Any] = {"file": target}
        url = resolve_storage_url(spec.name, storage, spec.storage)
    else:
        if overrides:
            raise ConfigError(
                f"--set changes a spec file, and {target!r} names a stored study; give the spec file instead "
                "(a stored study's spec is fixed when it is created)."
            )
        study = Study.open(target, storage)
        spec, url = study.spec, study.url
        sources = study.user_attrs.get(SOURCES_ATTR)
        task_input = study.user_attrs.get(INPUT_ATTR)
        where = {"study": target, "storage": study.masked_url}
    resolved = spec.to_dict()
    if "storage" in resolved:
        resolved["storage"] = mask_url(resolved["storage"])
    rows = spec_rows(resolved, sources)
    derived = _derived(spec, url, task_input)
    for row in rows:  # an unset key a run works out from the others: its value as the run resolves it
        if row["value"] is None and row["key"] in derived:
            row["value"], row["source"] = derived[row["key"]], DERIVED
    return {
        "name": spec.name,
        "from": where,
        "overrides": [mask_url(o) for o in overrides],
        "sources_recorded": sources is not None,
        "keys": rows,
        "spec": resolved,
    }


def _derived(spec: StudySpec, url: str, task_input: Mapping[str, Any] | None) -> dict[str, Any]:
    """The unset keys whose value a run works out: where the study is stored and its files kept, the finalists'
    budget a layout, and the timed sequence length where the study recorded what its task feeds the model."""
    out: dict[str, Any] = {
        "storage": mask_url(url),
        "artifacts": absolute_location(str(artifact_root_for(url))),
        "finalists.budget": f"{spec.finalists.units} runs a layout (seeds x folds)",
    }
    seq_len = ((task_input or {}).get("spec") or {}).get("seq_len")
    if seq_len is not None:
        out["latency.seq_len"] = seq_len
    return out
