"""Where a study's trials live: the searched architectures in the study itself, its finalist runs apart.

``optuna.load_study(NAME)`` holds the search: one trial per searched architecture, with its true objectives, so
Optuna's ``best_trials``, ``plot_pareto_front``, the hypervolume history and optuna-dashboard's front are right
as they stand. The finalist runs (retrained on cross-validation folds, with more epochs) and their re-timings
live in a *companion* study in the same storage, ``NAME/finalists`` (a name no explorer study can take: study
names never hold ``/``), created with the same objectives and labelled for the dashboard (its user attributes
``finalists_of`` and ``about``; ``explorer report`` adds the answer).

explorer's own readers see one study: a companion trial numbered ``n`` is trial ``FINALIST_BASE + n`` to them
(records, ``export --trial``, weights, reports), so numbers never collide with the search's. A study made
before the finalists were kept apart holds its finalist runs itself; it keeps them there
(:func:`explorer.storage._record.keeps_finalists_inside`), and every reader reads both places.
"""

from __future__ import annotations

from collections.abc import Iterator

import optuna
from optuna.trial import FrozenTrial

from explorer.storage import _optuna_private as optuna_private

SUFFIX = "/finalists"  # NAME/finalists: the companion of study NAME
FINALIST_BASE = 1_000_000_000  # a companion trial n is trial FINALIST_BASE + n to explorer's readers
COMPANION_ATTR = "finalists_of"  # the companion's user attribute naming the study it belongs to


def companion_name(name: str) -> str:
    """The companion study of study ``name``: ``NAME/finalists``."""
    return name + SUFFIX


def parent_name(name: str) -> str | None:
    """The study a companion belongs to (``NAME`` for ``NAME/finalists``), None for any other name."""
    return name.removesuffix(SUFFIX) if name.endswith(SUFFIX) and len(name) > len(SUFFIX) else None


def number_base(study_name: str) -> int:
    """What explorer adds to a trial's number in ``study_name``: FINALIST_BASE in a companion, else 0."""
    return FINALIST_BASE if parent_name(study_name) is not None else 0


def local_number(name: str, number: int) -> tuple[str, int]:
    """Where explorer's trial ``number`` of study ``name`` lives: (Optuna study name, its number there)."""
    if number >= FINALIST_BASE:
        return companion_name(name), number - FINALIST_BASE
    return name, number


def trial_label(name: str, number: int) -> str:
    """Explorer's trial ``number`` of study ``name`` as a person reads it: the Optuna study it lives in and its
    number there (``quickstart#12``, a finalist run ``quickstart/finalists#4``), never 1,000,000,000 + n."""
    where, local = local_number(name, number)
    return f"{where}#{local}"


def find_companion(study: optuna.Study) -> optuna.Study | None:
    """The companion of ``study`` in the same storage (through its connection: read-only stays read-only), or
    None when it has none."""
    name = companion_name(study.study_name)
    storage = optuna_private.storage_of(study)
    try:
        storage.get_study_id_from_name(name)
    except KeyError:
        return None
    return optuna.load_study(study_name=name, storage=storage)


def study_parts(study: optuna.Study) -> list[tuple[optuna.Study, int]]:
    """Every Optuna study an explorer study's trials live in, each with its number base: the study itself (0)
    and its companion (FINALIST_BASE) when there is one."""
    parts = [(study, 0)]
    companion = find_companion(study)
    if companion is not None:
        parts.append((companion, FINALIST_BASE))
    return parts


def trials_of(study: optuna.Study, states: tuple | None = None) -> Iterator[tuple[FrozenTrial, int]]:
    """Every trial of the study and of its companion (``states``: only those), each with its number base."""
    for part, base in study_parts(study):
        for t in part.get_trials(deepcopy=False, states=states):
            yield t, base


def label_companion(companion: optuna.Study, parent: optuna.Study) -> None:
    """What the dashboard shows of a companion: whose finalist runs it holds, and why they are apart."""
    companion.set_user_attr(COMPANION_ATTR, parent.study_name)
    companion.set_user_attr(
        "about",
        f"The finalist runs of the explorer study {parent.study_name!r}: its chosen layouts retrained on the same "
        "cross-validation folds and seeds (more epochs than the search), and their re-timings (user attribute "
        f"'retimed'). The searched architectures are the study {parent.study_name!r}; explorer numbers this "
        f"study's trial n as {FINALIST_BASE:,} + n.",
    )
