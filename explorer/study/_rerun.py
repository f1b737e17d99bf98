"""A spec run again on its existing study: what differs from the stored spec and which wins, and a total below
what is already done, answered read-only and before PyTorch loads (``explorer study run SPEC``).

What a study means (its task, space, objectives, measurement...) is fixed when it is created: a spec file that
differs there is refused, naming the first difference, and the stored spec wins. Its total (``n_trials``), its
timeout and its artifact location may change: the file's values apply to the run (a total below the search
trials already finished is refused).
"""

from __future__ import annotations

from typing import Any

import optuna

from explorer.errors import EmptyStorageError, SpecError, StorageBusyError, StudyNotFoundError
from explorer.spec import StudySpec, spec_from_dict
from explorer.storage import Role, load_records, mask_url, open_storage, sqlite_path, study_exists
from explorer.study._catalog import missing_spec
from explorer.study._run_options import check_total_reaches

__all__ = ["check_rerun", "check_same_meaning", "comparable", "differences", "finished_search"]


def comparable(spec: StudySpec) -> dict[str, Any]:
    """The parts of a spec that define the study's meaning (a new total, timeout, artifact location or tracking
    server is allowed on resume)."""
    d = spec.stored()
    for key in ("n_trials", "timeout", "artifacts", "tracking"):
        d.pop(key, None)
    return d


_ABSENT = object()  # a key one of two spec dicts lacks


def differences(stored: Any, given: Any, path: tuple[str, ...] = ()) -> list[str]:
    """Each key whose value differs between a stored spec dict and a given one, as ``[space] heads is [1, 2]
    stored, [1, 2, 4] in the file``."""
    if isinstance(stored, dict) and isinstance(given, dict):
        return [
            line
            for key in sorted(set(stored) | set(given))
            for line in differences(stored.get(key, _ABSENT), given.get(key, _ABSENT), (*path, str(key)))
        ]
    if stored == given:
        return []
    label = repr(path[0]) if len(path) == 1 else f"[{path[0]}] {'.'.join(path[1:])}"
    shown = ["absent" if v is _ABSENT else repr(v) for v in (stored, given)]
    return [f"{label} is {shown[0]} stored, {shown[1]} in the file"]


def check_same_meaning(stored: StudySpec, given: StudySpec, masked: str) -> None:
    """A SpecError naming the first difference (and how many more) when ``given`` means another study."""
    if diff := differences(comparable(stored), comparable(given)):
        more = f" (and {len(diff) - 1} more)" if len(diff) > 1 else ""
        raise SpecError(
            f"study {given.name!r} already exists in {masked} with a different spec: {diff[0]}{more}; the "
            f"stored spec wins: give the changed spec a new name, or resume the stored one with "
            f"`explorer study resume {given.name}`."
        )


def finished_search(study: Any) -> int:
    """The search trials a study has finished (COMPLETE or PRUNED): what a new total may not fall below."""
    return sum(r.state in ("COMPLETE", "PRUNED") for r in load_records(study, roles=(Role.SEARCH,)))


def _read_stored(name: str, url: str) -> tuple[optuna.Study, StudySpec]:
    """The study ``name`` at ``url`` (resolved) and its stored spec, opened read-only (as
    :func:`explorer.study._catalog.read_study`, without resolving the URL again)."""
    storage = open_storage(url, readonly=True)
    if not study_exists(storage, name):
        raise StudyNotFoundError(f"no study {name!r} in {mask_url(url)}")
    study = optuna.load_study(study_name=name, storage=storage)
    if "spec" not in study.user_attrs:
        raise missing_spec(name, mask_url(url), study.user_attrs)
    return study, spec_from_dict(study.user_attrs["spec"], stored=True)


def check_rerun(spec: StudySpec, url: str, total: int, total_from: str) -> StudySpec | None:
    """For a spec whose study already exists at ``url`` (resolved) with a stored spec: refuse a changed meaning,
    or a ``total`` below the search trials finished; return the stored spec so compared. A new study, or one
    without a spec (its creation is finished, or refused, by explorer.study._study.open_checked), passes: None."""
    path = sqlite_path(url)
    if path is not None and (not path.is_file() or path.stat().st_size == 0):
        return None  # a new database: open_checked creates it
    try:
        study, stored = _read_stored(spec.name, url)
    # busy: another command is creating it right now; empty: a new database (PostgreSQL), which open_checked fills
    except (StudyNotFoundError, SpecError, StorageBusyError, EmptyStorageError):
        return None
    check_same_meaning(stored, spec, mask_url(url))
    check_total_reaches(total, finished_search(study), spec.name, total_from)
    return stored
