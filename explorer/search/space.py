"""A study's fixed Optuna search space, and sampling a valid ModelConfig from a trial.

Optuna fails a trial whose categorical choices differ from earlier trials', and a multivariate sampler learns
only from parameters every trial shares. So every trial suggests the *same* parameters with the *same*
distributions, and each combination of them decodes to a valid architecture by construction: nothing is
rejected, repaired or wasted (``Sampled.rejected == 0`` and ``repaired is False`` always; tests hold it).

The parameters, in order:

* ``family``: categorical over the spec's schedule families (uniform, increasing, decreasing, free).
* ``d_model``, ``min_dk``, ``n_layers``: a categorical over the spec's list when every value is usable whatever
  the factors before it are (the usual case). When some value is not (say ``free`` needs 3 layers and the spec
  lists 2 and 3), the factor becomes ``<name>_q``, a float in [0, 1] read as a position in the values usable
  given the earlier factors: still ordinal, so the sampler learns "deeper" or "wider" across families.
  A factor with one value is not suggested at all.
* ``heads_q0 .. heads_q{L-1}``: floats in [0, 1], one per layer position the families use. Layer ``i``'s head
  count is the value at that position among the spec's head candidates *valid for the sampled d_model and
  min_dk* (dividing d_model, d_k >= min_dk), so an invalid count cannot be drawn. ``uniform`` reads heads_q0;
  ``increasing``/``decreasing`` read heads_q0 for the first layer and heads_q{L-1} for the last (the far end is
  drawn among the counts strictly above/below, so a ramp never degenerates to uniform) and fill the layers in
  between with :func:`explorer.engine.config.expand_schedule` (which steps through every valid count between the
  ends); ``free`` reads one per layer, each drawn among the counts that still allow a non-monotone schedule.
  Hence ``config.family`` is always the sampled family, and the families partition the space.
* ``mlp_ratio`` (categorical) and ``lr`` (log-uniform float) when the spec gives more than one value.

:meth:`SearchSpace.decode` maps a complete parameter dict to the config (a finished trial's ``params`` give
back its config); :meth:`SearchSpace.enumerate_configs` lists every reachable config and
:meth:`SearchSpace.size` counts them without building them. An empty or impossible space, or a listed value
that no valid configuration can use, is a :class:`SpecError` naming the value and the fix.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from explorer.engine.config import ModelConfig, valid_heads
from explorer.errors import ConfigError, SpecError
from explorer.search.spec import SAMPLERS

if TYPE_CHECKING:
    from explorer.search.spec import SpaceSpec, StudySpec

__all__ = ["SearchSpace", "Sampled", "make_sampler", "realisable_families"]

FACTORS = ("family", "d_model", "min_dk", "n_layers")  # sampled in this order; nominal family first
MIN_LAYERS = {"uniform": 1, "increasing": 2, "decreasing": 2, "free": 3}  # depth a family needs
MIN_COUNTS = {"uniform": 1, "increasing": 2, "decreasing": 2, "free": 2}  # valid head counts it needs


def _combos(
    space: SpaceSpec,
) -> tuple[dict[tuple[int, int], tuple[int, ...]], tuple[tuple[str, int, int, int], ...]]:
    """Valid head candidates per (d_model, min_dk), and every realisable (family, d_model, min_dk, n_layers)."""
    counts = {  # the one head rule lives in explorer.engine.config.valid_heads
        (d, m): tuple(h for h in space.heads if h in set(valid_heads(d, m)))
        for d in space.d_model
        for m in space.min_dk
    }
    combos = tuple(
        (f, d, m, n_layers)
        for f in space.families
        for d in space.d_model
        for m in space.min_dk
        for n_layers in space.n_layers
        if len(counts[d, m]) >= MIN_COUNTS[f] and n_layers >= MIN_LAYERS[f]
    )
    return counts, combos


def realisable_families(space: SpaceSpec) -> tuple[str, ...]:
    """The families of ``space.families`` that some d_model, min_dk and depth of the space can realise."""
    return tuple(dict.fromkeys(f for f, *_ in _combos(space)[1]))


def _pick(u: float, k: int) -> int:
    """Position ``u`` in [0, 1] as an index into ``k`` ordered items (equal-width bins)."""
    return min(max(int(u * k), 0), k - 1)


def _can_finish_free(idx: list[int], remaining: int) -> bool:
    """Whether ``remaining`` more layers can make the index sequence non-monotone (n >= 2 values assumed)."""
    up = any(a < b for a, b in itertools.pairwise(idx))
    down = any(a > b for a, b in itertools.pairwise(idx))
    return remaining >= (not up) + (not down)


@dataclass(frozen=True)
class Sampled:
    """One sampled point: the config to build, its learning rate, and the Optuna parameters it came from."""

    config: ModelConfig
    lr: float
    params: dict[str, Any]
    repaired: bool = False  # never True: every parameter combination decodes to a valid config
    rejected: int = 0  # never above 0, for the same reason; kept so the trial record can show it

    @property
    def family(self) -> str:
        return self.config.family


@dataclass(frozen=True)
class _Factor:
    name: str  # the attribute (family, d_model, min_dk, n_layers)
    values: tuple[Any, ...]  # the spec's values, in order
    mode: str  # fixed (one value, not suggested) | direct (categorical) | quantile (float position)

    @property
    def param(self) -> str:
        return f"{self.name}_q" if self.mode == "quantile" else self.name


class SearchSpace:
    """The finite set of valid configurations a spec declares, exposed through fixed Optuna distributions."""

    def __init__(self, space: SpaceSpec):
        self.space = space
        self.counts, self.combos = _combos(space)
        self._check()
        # options[p][prefix]: values of factor p usable after the earlier factors took the values in prefix
        self._options: list[dict[tuple[Any, ...], tuple[Any, ...]]] = []
        self.factors: list[_Factor] = []
        for p, name in enumerate(FACTORS):
            values = getattr(space, "families" if name == "family" else name)
            seen: dict[tuple[Any, ...], set[Any]] = {}
            for combo in self.combos:
                seen.setdefault(combo[:p], set()).add(combo[p])
            self._options.append({k: tuple(v for v in values if v in s) for k, s in seen.items()})
            if len(values) == 1:
                mode = "fixed"
            elif all(len(opts) == len(values) for opts in self._options[p].values()):
                mode = "direct"
            else:
                mode = "quantile"
            self.factors.append(_Factor(name, tuple(values), mode))
        dists: dict[str, BaseDistribution] = {}
        for factor in self.factors:
            if factor.mode == "direct":
                dists[factor.param] = CategoricalDistribution(factor.values)
            elif factor.mode == "quantile":
                dists[factor.param] = FloatDistribution(0.0, 1.0)
        if any(len(self.counts[d, m]) > 1 for _, d, m, _ in self.combos):
            for i in sorted({i for combo in self.combos for i in self._layer_positions(combo)}):
                dists[f"heads_q{i}"] = FloatDistribution(0.0, 1.0)
        if len(space.mlp_ratio) > 1:
            dists["mlp_ratio"] = CategoricalDistribution(space.mlp_ratio)
        if isinstance(space.lr, tuple):
            dists["lr"] = FloatDistribution(space.lr[0], space.lr[1], log=True)
        self.distributions: dict[str, BaseDistribution] = dists

    @classmethod
    def from_spec(cls, spec: StudySpec) -> SearchSpace:
        return cls(spec.space)

    @staticmethod
    def _layer_positions(combo: tuple[str, int, int, int]) -> tuple[int, ...]:
        family, _, _, n_layers = combo
        if family == "uniform":
            return (0,)
        return (0, n_layers - 1) if family in ("increasing", "decreasing") else tuple(range(n_layers))

    # ----------------------------------------------------------------------------------------- checks

    def _check(self) -> None:
        """Every listed value must be usable by some valid config; say which is not and how to fix it."""
        s = self.space
        floor = min(s.min_dk)
        if not any(self.counts.values()):
            raise SpecError(
                f"no head count in heads {list(s.heads)} divides any d_model in {list(s.d_model)} with "
                f"d_k >= {floor}; for d_model {s.d_model[-1]} the valid counts are "
                f"{valid_heads(s.d_model[-1], floor) or 'none'}: add some, or lower min_dk."
            )
        used = {i: {c[i] for c in self.combos} for i in range(4)}
        for f in s.families:
            if f not in used[0]:
                raise SpecError(
                    f"family {f!r} cannot be realised: it needs {MIN_LAYERS[f]}+ layers and {MIN_COUNTS[f]}+ valid "
                    f"head counts for one d_model and min_dk; add such n_layers or head counts, or drop {f!r}."
                )
        for d in s.d_model:
            if d not in used[1]:
                valid = sorted({h for m in s.min_dk for h in self.counts[d, m]})
                has = f"only the head counts {valid}" if valid else f"none of the head counts {list(s.heads)}"
                raise SpecError(
                    f"d_model {d} admits {has} at d_k >= {floor}, too few for families {list(s.families)}; "
                    f"add head counts from {valid_heads(d, floor)} or remove {d} from d_model."
                )
        for m in s.min_dk:
            if m not in used[2]:
                raise SpecError(
                    f"min_dk {m} leaves too few valid head counts for every d_model and family; lower it, "
                    f"remove it from min_dk, or add a wider d_model."
                )
        for n_layers in s.n_layers:
            if n_layers not in used[3]:
                raise SpecError(
                    f"n_layers {n_layers} fits none of the families {list(s.families)} (increasing and decreasing "
                    f"need 2+ layers, free 3+); remove it or add 'uniform' to families."
                )
        usable = {h for _, d, m, _ in self.combos for h in self.counts[d, m]}
        for h in s.heads:
            if h not in usable:
                if any(d % h == 0 for d in s.d_model):
                    d = max(d for d in s.d_model if d % h == 0)
                    why = (
                        f"d_k = {d}/{h} = {d // h} < {floor}"
                        if d // h < floor
                        else "no listed family can use it"
                    )
                else:
                    why = f"{h} divides no listed d_model"
                raise SpecError(
                    f"head count {h} is never valid ({why}); remove it from heads, lower min_dk or add a wider d_model."
                )

    # ----------------------------------------------------------------------------------------- sampling

    def sample(self, trial: optuna.Trial) -> Sampled:
        """Suggest every parameter of the fixed space on ``trial`` and decode them to a valid config."""
        params = {}
        for name, dist in self.distributions.items():
            if isinstance(dist, CategoricalDistribution):
                params[name] = trial.suggest_categorical(name, dist.choices)
            else:
                assert isinstance(dist, FloatDistribution)
                params[name] = trial.suggest_float(name, dist.low, dist.high, log=dist.log)
        return self.decode(params)

    def decode(self, params: Mapping[str, Any]) -> Sampled:
        """The config a complete parameter dict stands for (e.g. a finished trial's ``params``)."""
        missing = [name for name in self.distributions if name not in params]
        if missing:
            raise ConfigError(f"parameters {missing} are missing; give every parameter of this search space.")
        prefix: tuple[Any, ...] = ()
        for p, factor in enumerate(self.factors):
            options = self._options[p][prefix]
            if factor.mode == "fixed":
                value = factor.values[0]
            elif factor.mode == "direct":
                value = params[factor.param]
                if value not in options:
                    raise ConfigError(
                        f"{factor.name} = {value!r} is not in this search space; use one of {options}."
                    )
            else:
                value = options[_pick(float(params[factor.param]), len(options))]
            prefix += (value,)
        family, d_model, min_dk, n_layers = prefix
        counts = self.counts[d_model, min_dk]

        def u(i: int) -> float:
            return float(params.get(f"heads_q{i}", 0.0))

        schedule = _schedule(family, counts, n_layers, u)
        mlp_ratio = params.get("mlp_ratio", self.space.mlp_ratio[0])
        lr = params["lr"] if isinstance(self.space.lr, tuple) else self.space.lr
        config = ModelConfig.from_schedule(
            d_model,
            n_layers,
            schedule,
            min_dk,
            mlp_ratio=float(mlp_ratio),
            dropout=self.space.dropout,
            attention=self.space.attention,
        )
        return Sampled(config=config, lr=float(lr), params=dict(params))

    # ----------------------------------------------------------------------------------------- counting

    def enumerate_configs(self) -> Iterator[ModelConfig]:
        """Every configuration the space can produce, family by family (lazily: free spaces can be large)."""
        for family, d_model, min_dk, n_layers in self.combos:
            for schedule in _all_schedules(family, self.counts[d_model, min_dk], n_layers):
                for mlp_ratio in self.space.mlp_ratio:
                    yield ModelConfig.from_schedule(
                        d_model,
                        n_layers,
                        schedule,
                        min_dk,
                        mlp_ratio=mlp_ratio,
                        dropout=self.space.dropout,
                        attention=self.space.attention,
                    )

    def size(self) -> int:
        """How many configurations :meth:`enumerate_configs` yields (counted, not built)."""
        total = 0
        for family, d_model, min_dk, n_layers in self.combos:
            n = len(self.counts[d_model, min_dk])
            if family == "uniform":
                total += n
            elif family in ("increasing", "decreasing"):
                total += n * (n - 1) // 2
            else:  # all sequences minus the monotone ones (non-decreasing + non-increasing - constant)
                total += n**n_layers - 2 * math.comb(n + n_layers - 1, n_layers) + n
        return total * len(self.space.mlp_ratio)


def _schedule(family: str, counts: tuple[int, ...], n_layers: int, u: Callable[[int], float]) -> str:
    """The compact schedule that positions ``u(i)`` select among the valid ``counts`` (ascending)."""
    n = len(counts)
    if family == "uniform":
        return f"uniform:{counts[_pick(u(0), n)]}"
    last = n_layers - 1
    if family == "increasing":  # first layer among all but the top count, last layer strictly above it
        i = _pick(u(0), n - 1)
        j = i + 1 + _pick(u(last), n - 1 - i)
        return f"increasing:{counts[i]}-{counts[j]}"
    if family == "decreasing":  # first layer among all but the bottom count, last layer strictly below it
        i = 1 + _pick(u(0), n - 1)
        j = _pick(u(last), i)
        return f"decreasing:{counts[i]}-{counts[j]}"
    idx: list[int] = []
    for layer in range(n_layers):
        allowed = [k for k in range(n) if _can_finish_free([*idx, k], last - layer)]
        idx.append(allowed[_pick(u(layer), len(allowed))])
    return ",".join(str(counts[k]) for k in idx)


def _all_schedules(family: str, counts: tuple[int, ...], n_layers: int) -> Iterator[str]:
    """Every schedule of ``family`` over ``counts``: the set :func:`_schedule` ranges over."""
    if family == "uniform":
        yield from (f"uniform:{h}" for h in counts)
    elif family == "increasing":
        yield from (f"increasing:{a}-{b}" for a, b in itertools.combinations(counts, 2))
    elif family == "decreasing":
        yield from (f"decreasing:{b}-{a}" for a, b in itertools.combinations(counts, 2))
    else:
        for idx in itertools.product(range(len(counts)), repeat=n_layers):
            if _can_finish_free(list(idx), 0):
                yield ",".join(str(counts[k]) for k in idx)


def make_sampler(spec: StudySpec, stream: int = 0) -> optuna.samplers.BaseSampler:
    """The Optuna sampler the spec names, seeded from ``spec.seed``.

    Budgets reach the samplers through ``trial.set_constraint`` (Optuna 5.0 reads trial.constraints itself; the
    old ``constraints_func`` argument is deprecated there), so no constraints function is passed. ``stream``
    varies the seed reproducibly: give each worker process (and each resumed run) its own stream, or seeded
    samplers in parallel repeat one another's draws.
    """
    seed = spec.seed if stream == 0 else _mix(spec.seed, stream)
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
        # workers must share one sequence, so its seed ignores the stream; Optuna counts the points used in
        # the study's storage. The first trial comes from the independent sampler, streamed like "random".
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


def _mix(seed: int, stream: int) -> int:
    """A seed for ``stream`` that differs from every other stream's and stays the same from run to run."""
    import numpy as np

    return int(np.random.SeedSequence([seed, stream]).generate_state(1)[0])
