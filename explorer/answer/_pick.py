"""The trial a command's ``--trial`` names: the answer (or ``knee``), ``most-accurate``, ``fastest``, or a
trial's number; and the run that stands for a layout (:func:`select_run`)."""

from __future__ import annotations

from collections.abc import Sequence

from explorer.answer._answer import Answer, cost_estimate
from explorer.answer._recommend import answer
from explorer.answer._tables import Architecture, score
from explorer.errors import ConfigError, NoAnswerError, NoCompletedTrialsError
from explorer.spec import StudySpec
from explorer.storage import Retiming, TrialRecord, trial_label

ANSWER_NAMES = ("answer", "knee")  # what --trial calls the recommendation ("knee": its name before classes)


PICK_NAMES = (*ANSWER_NAMES, "most-accurate", "fastest")


def pick(ans: Answer, which: str) -> Architecture | None:
    """The architecture ``answer`` (alias ``knee``: the recommendation), ``most-accurate`` (the best) or
    ``fastest`` (the fastest candidate) names."""
    if which in ANSWER_NAMES:
        return ans.recommended
    candidates = ans.candidates
    if not candidates:
        return None
    if which == "most-accurate":
        return ans.best or max(candidates, key=lambda a: (a.score, -cost_estimate(a, ans.cost_axis)))
    if which == "fastest":
        return min(candidates, key=lambda a: (cost_estimate(a, ans.cost_axis), -a.score))
    raise ValueError(which)


def select_run(records: Sequence[TrialRecord], arch: Architecture) -> TrialRecord:
    """The run that stands for ``arch``: the one whose validation quality is the median of its runs (the lower
    middle one with an even count), so exported weights are typical of the layout, not its luckiest seed."""
    runs = sorted(
        (r for r in records if r.number in set(arch.numbers)),
        key=lambda r: (score(r.metric, r.quality or 0.0), r.number),
    )
    return runs[(len(runs) - 1) // 2]


def resolve_trial(
    records: Sequence[TrialRecord], spec: StudySpec, which: str, retimings: Sequence[Retiming] = ()
) -> TrialRecord:
    """The trial ``which`` names: ``answer`` (or ``knee``), ``most-accurate``, ``fastest`` (the run that stands
    for that layout, :func:`select_run`, of :func:`answer` with these ``retimings``), or the number of a
    COMPLETE trial."""
    if which in PICK_NAMES:
        ans = answer(records, spec, retimings)
        if ans.no_answer and which in ANSWER_NAMES:
            raise NoAnswerError(f"study {spec.name!r} has no answer to export: {ans.no_answer}.")
        arch = pick(ans, which)
        if arch is None:
            raise NoCompletedTrialsError(
                f"study {spec.name!r} has no completed feasible trial to pick from yet; run it first."
            )
        return select_run(records, arch)
    if not (which.isascii() and which.isdigit()):  # "²".isdigit() is True, int("²") fails
        raise ConfigError(f"--trial {which!r} is not answer, most-accurate, fastest or a trial number.")
    number = int(which)
    by_number = {r.number: r for r in records}
    if number not in by_number:
        raise ConfigError(
            f"study {spec.name!r} has no trial {trial_label(spec.name, number)}; `explorer study status {spec.name}` lists "
            "them."
        )
    r = by_number[number]
    if not r.finished:
        raise ConfigError(
            f"trial {trial_label(spec.name, number)} is {r.state.name}, not COMPLETE; pick a completed trial."
        )
    return r
