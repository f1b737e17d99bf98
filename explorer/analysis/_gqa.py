"""The grouped-query attention rule (Ainslie et al. 2023), checked on a study's own architectures.

Claim: grouped-query attention (1 < kv_heads < heads in every layer) keeps multi-head quality (kv_heads = heads)
at close to multi-query decoding cost (kv_heads = 1). It is checked in two parts, each with the statistics of
:mod:`explorer.analysis._rules`: the search's architectures are the units (seeds averaged), compared within
groups of equal width, depth and head width by a stratified exact permutation test and a stratified bootstrap
interval, at the last epoch every compared architecture trained. One-head models are left out (with one head,
multi-head and multi-query are the same thing).

* **Quality**, grouped-query against multi-head: the claim holds when the whole 95% interval of the quality
  lost to grouping is below the task's material difference (one accuracy point, or 1% of the bits per byte,
  :func:`explorer.answer._tables.quality_margin`), and is contradicted when the whole interval is above it.
* **Decoding cost**, grouped-query against multi-query: decoding time per token compared on the log scale, so
  the difference is a ratio. Close means at most ``CLOSE`` times multi-query's time: the claim holds when the
  whole 95% interval of the ratio is below it, and is contradicted when the whole interval is above it.

The verdict is *supported* when both parts hold, *contradicted* when either is contradicted, else *no
difference larger than X* for the part still open; *not enough data* without two architectures on each side,
or without decoding latency (a ``[decode]`` table, language-model tasks). Decoding times come from the
re-timings taken with nothing else running (:mod:`explorer.study._retime`) where the study has them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from explorer.analysis._groups import MIN_ARCHS, NOT_ENOUGH, evidence, group_comparison, no_difference
from explorer.analysis._rules import RuleVerdict
from explorer.answer import Architecture, attention_kind, decode_only, quality_margin
from explorer.layout import ModelConfig
from explorer.storage import Retiming, Role, TrialRecord

GQA_RULE = "Grouped-query attention keeps multi-head quality at close to multi-query decoding cost"
CLOSE = 1.25  # grouped-query decoding at most this many times multi-query's time counts as close to it


def searches_kv(records: Sequence[TrialRecord]) -> bool:
    """Whether a study's search tried layouts with fewer key/value heads than query heads."""
    return any(
        r.config is not None and r.config.kv_heads is not None for r in records if r.role == Role.SEARCH
    )


def _kind(name: str):  # noqa: ANN202 (a predicate on configs)
    return lambda c: min(c.heads) >= 2 and attention_kind(c) == name


def _strata(c: ModelConfig) -> tuple[Any, ...]:
    """Equal width, depth and head width (None: d_k = d_model / heads, varying with the heads)."""
    return (c.d_model, c.n_layers, c.head_dim)


def _log_decode(a: Architecture) -> float | None:
    return None if a.decode is None else math.log(a.decode.estimate)


def _quality(records: Sequence[TrialRecord]) -> tuple[str, str]:
    """(part verdict, evidence) for "grouped-query keeps multi-head quality"."""
    g, n_a, n_b = group_comparison(
        records, _kind("grouped-query"), _kind("multi-head"), _strata, alternative="less"
    )
    if g is None:
        return NOT_ENOUGH, (
            f"quality needs >= {MIN_ARCHS} grouped-query and multi-head architectures (2+ heads) at a shared "
            f"width, depth and head width; the study has {n_a} and {n_b}"
        )
    c = g.comparison
    margin = quality_margin(g.metric, c.mean_b)
    what = "1 point" if g.metric.direction == "maximize" else f"{margin:.3f} bits per byte (1%)"
    ev = "quality: " + evidence(g, "grouped-query", "multi-head")
    if c.low > -margin:
        return "supported", ev + f": whatever grouping loses is below {what}"
    if c.high < -margin:
        return "contradicted", ev + f": grouping loses more than {what}"
    return no_difference(c, g.metric), ev


def _cost(records: Sequence[TrialRecord], retimings: Sequence[Retiming]) -> tuple[str, str]:
    """(part verdict, evidence) for "grouped-query decodes at close to multi-query cost"."""
    if not any(r.decode is not None for r in records if r.role == Role.SEARCH):
        return NOT_ENOUGH, "decoding cost: the study measured no decoding latency (add a [decode] table)"
    gqa, mqa, mha = _kind("grouped-query"), _kind("multi-query"), _kind("multi-head")
    timed = decode_only(retimings)
    g, n_a, n_b = group_comparison(
        records, gqa, mqa, _strata, alternative="greater", value=_log_decode, retimings=timed
    )
    if g is None:
        return NOT_ENOUGH, (
            f"decoding cost needs >= {MIN_ARCHS} grouped-query and multi-query architectures with decoding "
            f"latency at a shared width, depth and head width; the study has {n_a} and {n_b}"
        )
    c = g.comparison
    ratio, low, high = math.exp(c.diff), math.exp(c.low), math.exp(c.high)
    p = f"p = {c.p_value:.3g}{'' if c.exact else ' (Monte Carlo)'}"
    source = "re-timed after all training ended" if timed else "timed during the search"
    ev = (
        f"decoding cost: grouped-query takes {ratio:.2f}x the decoding time per token of multi-query, 95% "
        f"interval [{low:.2f}x, {high:.2f}x] ({c.n_a} vs {c.n_b} architectures in {c.strata} group(s), {source}; {p})"
    )
    full, _, _ = group_comparison(
        records, mha, mqa, _strata, alternative="greater", value=_log_decode, retimings=timed
    )
    if full is not None:
        ev += f"; multi-head takes {math.exp(full.comparison.diff):.2f}x multi-query's"
    if high <= CLOSE:
        return "supported", ev + f": within {CLOSE:.2f}x of multi-query"
    if low > CLOSE:
        return "contradicted", ev + f": more than {CLOSE:.2f}x multi-query's"
    bound = max(abs(low - 1), abs(high - 1))
    return f"no difference larger than {bound * 100:.0f}% in decoding time", ev


def gqa_rule(records: Sequence[TrialRecord], retimings: Sequence[Retiming] = ()) -> RuleVerdict:
    """Check the grouped-query rule (module docstring) on the study's search architectures."""
    (q, q_ev), (d, d_ev) = _quality(records), _cost(records, retimings)
    ev = f"{q_ev}; {d_ev}"
    if NOT_ENOUGH in (q, d):
        return RuleVerdict(GQA_RULE, NOT_ENOUGH, ev)
    if "contradicted" in (q, d):
        part = "quality" if q == "contradicted" else "decoding cost"
        return RuleVerdict(GQA_RULE, "contradicted", f"{ev} (contradicted on {part})")
    if q == d == "supported":
        return RuleVerdict(GQA_RULE, "supported", ev)
    return RuleVerdict(GQA_RULE, q if q != "supported" else d, ev)
