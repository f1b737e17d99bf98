"""Samplers that never spend a search trial on an architecture the study has already evaluated.

The space decodes many parameter values to one architecture (a position in [0, 1] picks one of a few head
counts, and several d_k floors admit the same layout), so a plain sampler happily proposes the same architecture
again: on the quickstart, TPE repeated one in more than half of its trials. :class:`UniqueSampler` wraps the
spec's sampler: it asks it for a point, and when that point decodes to an architecture already taken (evaluated,
running or queued in this study), asks again, up to a limit; then it takes an untaken architecture at random.
Both counts are real and are stored on the trial (``rejected``, ``proposal``). Two workers can still pick the
same one at the same moment; the objective's claim (:mod:`explorer.study._claims`) settles that.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from explorer.errors import SpecError
from explorer.spec import SAMPLERS, Sampled, SearchSpace, StudySpec
from explorer.storage import (
    Proposal,
    Role,
    arch_key,
    enqueued_params,
    is_bookkeeping,
    role_of,
    write as write_record,
)

_TAKEN_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)
_RETRIES = {"tpe": 32, "nsga2": 32, "random": 0, "qmc": 1, "gp": 1}  # asks before falling back


def stream_seed(seed: int, *stream: int) -> int:
    """A seed for a stream of ``seed`` (a worker, a resumed run) that differs from every other stream's."""
    if not stream:
        return seed
    return int(np.random.SeedSequence([seed, *stream]).generate_state(1)[0])


def _base_sampler(spec: StudySpec, seed: int) -> optuna.samplers.BaseSampler:
    if spec.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if spec.sampler == "nsga2":
        # a generation per ~1/5 of the budget, so that small studies still evolve
        population = min(50, max(8, spec.n_trials // 5))
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
    if spec.sampler == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if spec.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if spec.sampler == "qmc":
        # Scrambled Sobol points cover the space evenly (each aligned block of 2^m points puts 2^m / q in each of
        # q equal bins of a parameter, q a power of 2 up to 2^m): for a small space to cover, not search. All
        # workers share one sequence (its seed is the spec's), counted in the study's storage.
        with warnings.catch_warnings():  # "experimental since 3.0": a notice for developers, not for users
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.QMCSampler(
                qmc_type="sobol",
                scramble=True,
                seed=spec.seed,
                independent_sampler=optuna.samplers.RandomSampler(seed=seed),
                warn_independent_sampling=False,
            )
    raise SpecError(f"sampler {spec.sampler!r} is unknown; choose one of {', '.join(SAMPLERS)}.")


class _QualityDirection:
    """The study as the base sampler reads it: the same study, whose ``direction`` is its first objective's (the
    task's quality, what a trial's per-epoch intermediate values measure). A multi-objective TPE ranks a pruned
    trial by its last intermediate value in ``study.direction``, which a multi-objective study refuses to give;
    explorer stores every trial's learning curve as intermediate values, so a study with early stopping has such
    trials. Everything else is the study's own."""

    def __init__(self, study: optuna.Study):
        self._study = study

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    @property
    def direction(self) -> optuna.study.StudyDirection:
        return self._study.directions[0]


def _for_base(study: optuna.Study) -> Any:
    """``study`` as the base sampler gets it (:class:`_QualityDirection` for a multi-objective study)."""
    return _QualityDirection(study) if len(study.directions) > 1 else study


class UniqueSampler(optuna.samplers.BaseSampler):
    """``base`` restricted to architectures the study has not taken (see the module docstring).

    Args:
        base: the sampler that proposes points.
        space: the study's search space (decodes points, lists the untaken architectures).
        seed: seeds the fallback's random choice.
        retries: how many proposals of taken architectures to skip before falling back.
    """

    def __init__(self, base: optuna.samplers.BaseSampler, space: SearchSpace, seed: int, retries: int):
        self.base, self.space, self.retries = base, space, retries
        self._rng = random.Random(seed)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()
        self._rng.seed()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return dict(self.space.distributions)

    def _taken(self, study: optuna.Study) -> set[str]:
        taken = set()
        for t in study.get_trials(deepcopy=False, states=_TAKEN_STATES):
            if is_bookkeeping(t) or role_of(t) is not Role.SEARCH:
                continue
            params = t.params or enqueued_params(t) or {}
            if all(name in params for name in self.space.distributions):
                s = self.space.decode(params)
                taken.add(arch_key(s.config, s.lr))
        return taken

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space or enqueued_params(trial) is not None:  # an enqueued trial brings its own
            return {}
        taken = self._taken(study)
        rejected = 0
        base_space = self.base.infer_relative_search_space(_for_base(study), trial)
        # readable parameters follow from the positions: the base sampler models the positions alone
        base_space = {k: v for k, v in base_space.items() if k not in self.space.readable}
        if set(self.space.distributions) <= set(base_space):
            for _ in range(self.retries):
                params = self.base.sample_relative(_for_base(study), trial, base_space)
                if not set(self.space.distributions) <= set(params):
                    break  # the base sampler is still in its start-up phase
                s = self.space.decode(params)
                if arch_key(s.config, s.lr) not in taken:
                    self._note(study, trial, rejected, Proposal.SAMPLER)
                    return {name: params[name] for name in self.space.distributions}
                rejected += 1
        chosen, seen = None, 0
        for s in self.space.points():  # reservoir sampling: uniform over the untaken architectures
            if arch_key(s.config, s.lr) in taken:
                continue
            seen += 1
            if self._rng.random() * seen < 1:
                chosen = s
        if chosen is None:  # every architecture is taken: the objective finds its claim held and says so
            self._note(study, trial, rejected, Proposal.EXHAUSTED)
            return {}
        self._note(study, trial, rejected, Proposal.UNEVALUATED if rejected else Proposal.RANDOM)
        return dict(chosen.params)

    @staticmethod
    def _note(study: optuna.Study, trial: FrozenTrial, rejected: int, how: Proposal) -> None:
        write_record(trial, study, proposal=how, rejected=rejected)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        if param_name in self.space.readable:  # what the positions suggested so far decode to
            return self.space.decode(trial.params).readable[param_name]
        return self.base.sample_independent(_for_base(study), trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Any,
    ) -> None:
        self.base.after_trial(study, trial, state, values)


def suggest_readable(trial: optuna.Trial, sampled: Sampled, space: SearchSpace) -> None:
    """Record a search trial's readable parameters (head counts per layer...) as Optuna params, after its
    positions; the study's :class:`UniqueSampler` (or an enqueued retry's fixed params) gives each its value.
    Under another sampler (a caller's own Objective loop) they are left out: it would draw them at random."""
    if not isinstance(trial.study.sampler, UniqueSampler):
        return
    for name, value in sampled.readable.items():
        got = trial.suggest_categorical(name, space.readable[name].choices)
        if got != value:
            raise RuntimeError(f"readable parameter {name} = {got!r}, but the positions decode to {value!r}")


def make_sampler(spec: StudySpec, *stream: int, space: SearchSpace | None = None) -> UniqueSampler:
    """The spec's sampler, seeded from ``spec.seed`` and ``stream``, wrapped in :class:`UniqueSampler`.

    Budgets reach the samplers through ``trial.set_constraint`` (Optuna 5.0 reads trial.constraints itself), so
    no constraints function is passed. Give each worker process (and each resumed run) its own ``stream``: seeded
    samplers built alike draw alike. ``space``: the spec's search space when the caller has built it already.
    """
    seed = stream_seed(spec.seed, *stream)
    space = SearchSpace(spec.space) if space is None else space
    return UniqueSampler(_base_sampler(spec, seed), space, seed, _RETRIES[spec.sampler])
