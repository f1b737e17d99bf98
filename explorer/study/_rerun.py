"""A spec run again on its existing study: what differs from the stored spec and which wins, and the search
trials already done, which a new total may not fall below (compared read-only by
:func:`explorer.study._run_plan.check_rerun` before anything is created or changed).

What a study means (its task, space, objectives, measurement...) is fixed when it is created: a spec file that
differs there is refused, naming the first difference, and the stored spec wins. Its total (``n_trials``), its
timeout and its artifact location may change: the file's values apply to the run (a total below the search
trials already finished is refused).
"""

from __future__ import annotations

from typing import Any

from explorer.errors import SpecError
from explorer.spec import StudySpec
from explorer.storage import DONE_STATES, Role, load_records


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
    return sum(r.state in DONE_STATES for r in load_records(study, roles=(Role.SEARCH,)))
