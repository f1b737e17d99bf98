"""A study's fixed Optuna search space, and sampling a valid ModelConfig from a trial.

Optuna fails a trial whose categorical choices differ from earlier trials', and a multivariate sampler learns
only from parameters every trial shares. So every trial suggests the *same* parameters with the *same*
distributions, and each combination of them decodes to a valid architecture by construction: nothing is
rejected, repaired or wasted (every sample is a valid, buildable config; ``tests/spec/test_search_space.py`` holds it).

The parameters, in order:

* ``family``: categorical over the spec's schedule families (uniform, increasing, decreasing, free).
* ``d_model``, ``min_dk``, ``head_dim``, ``n_layers``: a categorical over the spec's list when every value is
  usable whatever
  the factors before it are (the usual case). When some value is not (say ``free`` needs 3 layers and the spec
  lists 2 and 3), the factor becomes ``<name>_q``, a float in [0, 1] read as a position in the values usable
  given the earlier factors: still ordinal, so the sampler learns "deeper" or "wider" across families.
  A factor with one value is not suggested at all.
* ``heads_q0 .. heads_q{L-1}``: floats in [0, 1], one per layer position the families use. Layer ``i``'s head
  count is the value at that position among the spec's head candidates *valid for the sampled d_model and
  min_dk* (dividing d_model, d_k >= min_dk), so an invalid count cannot be drawn. ``uniform`` reads heads_q0;
  ``increasing``/``decreasing`` read heads_q0 for the first layer and heads_q{L-1} for the last (the far end is
  drawn among the counts strictly above/below, so a ramp never degenerates to uniform) and fill the layers in
  between with :func:`explorer.layout._schedules.expand_schedule` (which steps through every valid count between the
  ends); ``free`` reads one per layer, each drawn among the counts that still allow a non-monotone schedule.
  Hence ``config.family`` is always the sampled family, and the families partition the space.
* ``mlp_ratio`` (categorical) and ``lr`` (log-uniform float) when the spec gives more than one value.
* Readable parameters beside the positions (:attr:`SearchSpace.readable`): ``heads_layer0 ..`` (each layer's
  head count), ``kv_heads_layer0 ..`` where key/value heads are searched, and ``d_model``, ``n_layers``,
  ``min_dk``, ``head_dim`` where the factor is a position. Each is a categorical over every value the space can
  give it (fixed, as Optuna needs), suggested after the positions and equal to what they decode to
  (:class:`explorer.study._sampling.UniqueSampler` answers them), so optuna-dashboard's and
  ``optuna.visualization``'s slice, parallel-coordinate and importance plots name head counts. The positions
  stay the sampled space: drawing per-layer counts directly would draw invalid schedules (a ramp that does not
  rise, a "free" layout that is monotone) that must then be rejected.
* ``kv_q`` (or ``kv_q0 .. kv_q{L-1}``): positions among the key/value head candidates that divide each layer's
  head count, when the spec searches ``kv_heads`` (:mod:`explorer.layout._layouts`). A space that searches
  ``kv_heads`` or ``head_dim`` builds its ramps through the spec's head candidates only.

:meth:`SearchSpace.decode` maps a complete parameter dict to the config (a finished trial's ``params`` give
back its config); :meth:`SearchSpace.enumerate_configs` lists every reachable config and
:meth:`SearchSpace.size` counts them without building them. An empty or impossible space, or a listed value
that no valid configuration can use, is a :class:`SpecError` naming the value and the fix.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution

from explorer.errors import ConfigError
from explorer.layout import (
    FACTORS,
    Combo,
    ModelConfig,
    SpaceSpec,
    candidate_heads,
    check_space,
    count_layouts,
    kv_layout,
    kv_param_names,
    kv_params,
    pick,
    space_combos,
    valid_heads,
)

_pick = pick


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
    readable: dict[str, Any] = field(default_factory=dict)  # SearchSpace.readable's values for this point

    @property
    def family(self) -> str:
        return self.config.family


@dataclass(frozen=True)
class _Factor:
    name: str  # the attribute (family, d_model, min_dk, head_dim, n_layers)
    values: tuple[Any, ...]  # the spec's values, in order
    mode: str  # fixed (one value, not suggested) | direct (categorical) | quantile (float position)

    @property
    def param(self) -> str:
        return f"{self.name}_q" if self.mode == "quantile" else self.name


class SearchSpace:
    """The finite set of valid configurations a spec declares, exposed through fixed Optuna distributions."""

    def __init__(self, space: SpaceSpec):
        self.space = space
        check_space(space)
        self.counts, self.combos = space_combos(space)
        # options[p][prefix]: values of factor p usable after the earlier factors took the values in prefix
        self._options: list[dict[tuple[Any, ...], tuple[Any, ...]]] = []
        self.factors: list[_Factor] = []
        for p, name in enumerate(FACTORS):
            values = getattr(space, "families" if name == "family" else name) or (None,)
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
        if any(len(self.counts[d, m, hd]) > 1 for _, d, m, hd, _ in self.combos):
            for i in sorted({i for combo in self.combos for i in self._layer_positions(combo)}):
                dists[f"heads_q{i}"] = FloatDistribution(0.0, 1.0)
        if len(space.mlp_ratio) > 1:
            dists["mlp_ratio"] = CategoricalDistribution(space.mlp_ratio)
        if isinstance(space.lr, tuple):
            dists["lr"] = FloatDistribution(space.lr[0], space.lr[1], log=True)
        usable = {h for hs in self.counts.values() for h in hs}
        if any(len(space.kv_options(h)) > 1 for h in usable):
            for name in kv_param_names(space, max(space.n_layers)):
                dists[name] = FloatDistribution(0.0, 1.0)
        self.distributions: dict[str, BaseDistribution] = dists
        self.readable: dict[str, CategoricalDistribution] = self._readable(usable)
        # Spaces with kv heads or a head width build layouts from the candidates (explorer.layout._layouts).
        self.modern = space.kv_heads is not None or space.head_dim is not None

    def _readable(self, usable: set[int]) -> dict[str, CategoricalDistribution]:
        """The readable parameters and every value each can take (see the module docstring)."""
        if not (self.space.kv_heads or self.space.head_dim):  # a ramp of 3+ layers steps through valid counts
            usable = usable | {h for d, m, _ in self.counts for h in valid_heads(d, m)}
        layers = range(max(self.space.n_layers))
        out: dict[str, CategoricalDistribution] = {}
        if len(usable) > 1:
            out |= {f"heads_layer{i}": CategoricalDistribution(tuple(sorted(usable))) for i in layers}
        if self.space.kv_heads is not None and len(self.space.kv_heads) > 1:
            kv = CategoricalDistribution(tuple(sorted(self.space.kv_heads)))
            out |= {f"kv_heads_layer{i}": kv for i in layers}
        out |= {f.name: CategoricalDistribution(f.values) for f in self.factors if f.mode == "quantile"}
        return out

    @staticmethod
    def _layer_positions(combo: Combo) -> tuple[int, ...]:
        family, *_, n_layers = combo
        if family == "uniform":
            return (0,)
        return (0, n_layers - 1) if family in ("increasing", "decreasing") else tuple(range(n_layers))

    # ----------------------------------------------------------------------------------------- checks

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
        family, d_model, min_dk, head_dim, n_layers = prefix
        counts = self.counts[d_model, min_dk, head_dim]

        def u(i: int) -> float:
            return float(params.get(f"heads_q{i}", 0.0))

        schedule = _schedule(family, counts, n_layers, u)
        mlp_ratio = params.get("mlp_ratio", self.space.mlp_ratio[0])
        lr = params["lr"] if isinstance(self.space.lr, tuple) else self.space.lr
        mlp, dropout, attention = float(mlp_ratio), self.space.dropout, self.space.attention
        if not self.modern:
            config = ModelConfig.from_schedule(
                d_model, n_layers, schedule, min_dk, mlp_ratio=mlp, dropout=dropout, attention=attention
            )
        else:
            heads = candidate_heads(schedule, counts, n_layers)
            config = ModelConfig(
                d_model=d_model,
                heads=heads,
                min_dk=min_dk,
                schedule=schedule,
                kv_heads=kv_layout(self.space, heads, params),
                head_dim=head_dim,
                mlp_ratio=mlp,
                dropout=dropout,
                attention=attention,
            )
        readable = {f"heads_layer{i}": h for i, h in enumerate(config.heads)}
        readable |= {f"kv_heads_layer{i}": h for i, h in enumerate(config.kv_heads or ())}
        readable |= {f.name: v for f, v in zip(self.factors, prefix, strict=True) if f.mode == "quantile"}
        readable = {k: v for k, v in readable.items() if k in self.readable}
        return Sampled(config=config, lr=float(lr), params=dict(params), readable=readable)

    # ----------------------------------------------------------------------------------------- listing

    def points(self) -> Iterator[Sampled]:
        """Every configuration the space can produce, each with parameters that :meth:`decode` maps back to it.

        Lazily, family by family. A searched learning rate is given its range's geometric midpoint.
        """
        lr = math.sqrt(self.space.lr[0] * self.space.lr[1]) if isinstance(self.space.lr, tuple) else None
        for combo in self.combos:
            base: dict[str, Any] = {}
            for p, factor in enumerate(self.factors):
                value = combo[p]
                if factor.mode == "direct":
                    base[factor.param] = value
                elif factor.mode == "quantile":
                    options = self._options[p][combo[:p]]
                    base[factor.param] = (options.index(value) + 0.5) / len(options)
            family, d_model, min_dk, head_dim, n_layers = combo
            counts = self.counts[d_model, min_dk, head_dim]
            for heads_params in _heads_params(family, len(counts), n_layers):
                for mlp_ratio in self.space.mlp_ratio:
                    params = {
                        name: 0.5 for name in self.distributions if name.startswith(("heads_q", "kv_q"))
                    }
                    params |= base | heads_params
                    if "mlp_ratio" in self.distributions:
                        params["mlp_ratio"] = mlp_ratio
                    if lr is not None:
                        params["lr"] = lr
                    if not any(name.startswith("kv_q") for name in self.distributions):
                        yield self.decode(params)
                        continue
                    heads = self.decode(params).config.heads
                    for kv in kv_params(self.space, heads):
                        yield self.decode(params | kv)

    # ----------------------------------------------------------------------------------------- counting

    def enumerate_configs(self) -> Iterator[ModelConfig]:
        """Every configuration the space can produce, family by family (lazily: free spaces can be large)."""
        if self.modern:
            yield from (p.config for p in self.points())
            return
        for family, d_model, min_dk, _, n_layers in self.combos:
            for schedule in _all_schedules(family, self.counts[d_model, min_dk, None], n_layers):
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
        """How many configurations :meth:`points` yields, counted without building them
        (explorer.layout._counting)."""
        return count_layouts(self.space)


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


def _heads_params(family: str, n: int, n_layers: int) -> Iterator[dict[str, float]]:
    """For every schedule of ``family`` over ``n`` valid counts, the ``heads_q*`` positions that select it in
    :func:`_schedule` (the middle of each position's bin)."""
    last = n_layers - 1
    if n == 1:  # a single valid count: nothing to choose
        yield {}
    elif family == "uniform":
        yield from ({"heads_q0": (k + 0.5) / n} for k in range(n))
    elif family == "increasing":
        for i in range(n - 1):
            for j in range(i + 1, n):
                yield {"heads_q0": (i + 0.5) / (n - 1), f"heads_q{last}": (j - i - 1 + 0.5) / (n - 1 - i)}
    elif family == "decreasing":
        for i in range(1, n):
            for j in range(i):
                yield {"heads_q0": (i - 1 + 0.5) / (n - 1), f"heads_q{last}": (j + 0.5) / i}
    else:
        for idx in itertools.product(range(n), repeat=n_layers):
            if not _can_finish_free(list(idx), 0):
                continue
            params = {}
            for layer in range(n_layers):
                allowed = [k for k in range(n) if _can_finish_free([*idx[:layer], k], last - layer)]
                params[f"heads_q{layer}"] = (allowed.index(idx[layer]) + 0.5) / len(allowed)
            yield params


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
