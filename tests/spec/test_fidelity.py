"""Early stopping that is honest under noise: rungs, seed and split noise from the study's spread, t critical
values, Bonferroni over peers and rungs, never another seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer.measurements import binomial_se, plateaued
from explorer.spec import Peer, dominated_at_rung

N = 270  # validation examples


def peer(number, acc, latency=1.0, key=None, spread=0.02):
    return Peer(number, key or f"arch{number}", latency, spread, (acc, acc, acc))


def crowd(values, latency=2.0, start=100):
    """Slower peers (never compared with the trial) whose values give the epoch its spread."""
    return [peer(start + i, float(v), latency=latency) for i, v in enumerate(values)]


SPREAD_3 = 0.60 + 0.03 * np.linspace(-1.6, 1.6, 19)  # 19 values, about 3 points apart from their mean


def test_a_clear_lead_by_a_faster_architecture_stops():
    v = dominated_at_rung(3, 0.40, N, "me", 1.0, 0.02, [peer(1, 0.80, 0.9), *crowd(SPREAD_3)], alpha=0.05)
    assert v.stop and "trial #1" in v.reason and "standard errors" in v.reason
    assert "21 values" in v.reason and "19 degrees of freedom" in v.reason


def test_a_lead_inside_the_split_noise_does_not_stop_even_when_the_study_agrees_exactly():
    se = np.hypot(binomial_se(0.80, N), binomial_se(0.78, N))
    assert 0.02 < 1.7 * se  # two points on 270 examples is noise
    agreeing = crowd([0.80] * 19)  # no spread at all between the other values: the binomial floor holds
    assert not dominated_at_rung(3, 0.78, N, "me", 1.0, 0.02, [peer(1, 0.80, 0.9), *agreeing], 0.05).stop


def test_a_lead_beyond_the_split_but_inside_the_seed_noise_does_not_stop():
    """The study's values spread 6 points at this epoch: a 12-point lead clears the binomial test (the
    split alone: 1.645 x 4.1 points) but not seed and split noise together."""
    lead = 0.12
    assert lead > 1.645 * np.hypot(binomial_se(0.72, N), binomial_se(0.60, N))
    wide = crowd(0.60 + 0.06 * np.linspace(-1.6, 1.6, 19))
    assert not dominated_at_rung(3, 0.60, N, "me", 1.0, 0.02, [peer(1, 0.60 + lead, 0.9), *wide], 0.05).stop
    narrow = crowd(SPREAD_3)  # the same lead where the study's values agree within 3 points: stopped
    assert dominated_at_rung(3, 0.60, N, "me", 1.0, 0.02, [peer(1, 0.60 + lead, 0.9), *narrow], 0.05).stop


def test_slower_architectures_and_other_seeds_never_count():
    slower = peer(1, 0.95, latency=2.0)
    same_arch = peer(2, 0.95, latency=0.5, key="me")
    peers = [slower, same_arch, *crowd(SPREAD_3)]
    assert not dominated_at_rung(3, 0.40, N, "me", 1.0, 0.02, peers, alpha=0.05).stop


def test_a_latency_tie_within_the_spread_counts_as_at_least_as_fast():
    nearly = peer(1, 0.95, latency=1.03, spread=0.05)  # 3% slower, inside a 5% spread
    assert dominated_at_rung(3, 0.40, N, "me", 1.0, 0.05, [nearly, *crowd(SPREAD_3)], alpha=0.05).stop


def test_fewer_than_three_values_at_the_epoch_never_stop():
    alone = [peer(1, 0.99, 0.5)]
    assert not dominated_at_rung(3, 0.10, N, "me", 1.0, 0.02, alone, alpha=0.05).stop
    short = Peer(2, "arch2", 3.0, 0.02, (0.5, 0.5))  # stopped before epoch 3: no value there
    assert not dominated_at_rung(3, 0.10, N, "me", 1.0, 0.02, [*alone, short], alpha=0.05).stop


def leads_needed(m_fast: int, n_rungs: int, alpha: float = 0.05) -> list[bool]:
    """Stops for a range of leads over 30 peers of the same values, ``m_fast`` of them faster."""
    values = 0.60 + 0.03 * np.linspace(-1.6, 1.6, 30)
    peers = [peer(i, float(v), latency=0.9 if i < m_fast else 2.0) for i, v in enumerate(values)]
    out = []
    for lead in np.arange(0.0, 0.30, 0.01):
        best = Peer(99, "best", 0.9, 0.02, (0.60 + lead,) * 3)
        out.append(
            dominated_at_rung(3, 0.60, N, "me", 1.0, 0.02, [best, *peers], alpha, n_rungs=n_rungs).stop
        )
    return out


def test_more_peers_and_more_rungs_need_a_bigger_lead():
    """Bonferroni over the peers compared and over the trial's rungs: the smallest lead that stops grows with
    either, the values at the epoch being the same."""
    one = leads_needed(0, 1).index(True)
    many = leads_needed(30, 1).index(True)
    rungs = leads_needed(0, 4).index(True)
    assert one < many and one < rungs


def test_the_t_test_has_its_stated_size_for_one_comparison():
    """With normal noise far above the split's and one faster peer at one rung, a trial that is as good is
    stopped at rate alpha: not more (a normal quantile in place of t's) and not much less (a spread that
    counts the lead under test as noise too would stop about 0.3% here)."""
    rng = np.random.default_rng(1)
    sims, stops = 10_000, 0
    for _ in range(sims):
        x = 0.5 + 0.10 * rng.standard_normal(10)  # 10 values 10 points apart; the split of 10^6 adds nothing
        peers = [peer(1, x[1], 0.9)] + crowd(x[2:])
        stops += dominated_at_rung(3, x[0], 10**6, "me", 1.0, 0.02, peers, alpha=0.02).stop
    assert 0.014 < stops / sims < 0.026  # 0.02 within 4 standard errors of 10,000 draws


# ------------------------------------------------------------- a search with no real difference, replayed


def synthetic_search(rng, n_arch=30, worst=None):
    """Histories of ``n_arch`` architectures that are all equally good: a shared learning curve, a seed
    offset that persists across epochs (3.5 points), per-epoch seed noise (2 points) and the binomial noise of
    270 validation examples. ``worst``: that architecture is truly worse by ``worst`` at every epoch."""
    curve = np.array([0.37, 0.49, 0.56, 0.63, 0.68, 0.73, 0.78, 0.82, 0.84, 0.86, 0.86, 0.86])
    runs = []
    for i in range(n_arch):
        mean = curve + 0.035 * rng.standard_normal() + 0.02 * rng.standard_normal(12)
        if worst is not None and i == 0:
            mean = mean - worst
        acc = rng.binomial(N, np.clip(mean, 0.01, 0.99)) / N
        runs.append((f"arch{i}", float(rng.uniform(1, 3)), tuple(float(a) for a in acc)))
    return runs


def replay(runs, order, rungs=(3, 6), alpha=0.05):
    """The epoch each trial stops at (its full length when it does not), trials run in ``order``."""
    done: list[Peer] = []
    stopped_at = {}
    for i in order:
        key, latency, hist = runs[i]
        stop = len(hist)
        for rung in rungs:
            if dominated_at_rung(
                rung, hist[rung - 1], N, key, latency, 0.02, done, alpha, n_rungs=len(rungs)
            ).stop:
                stop = rung
                break
        stopped_at[i] = stop
        done.append(Peer(i, key, latency, 0.02, hist[:stop]))
    return stopped_at


def binomial_only_stops(runs, rung=3, alpha=0.05):
    """How many trials the split's noise alone would stop at one rung, every other trial a peer (Bonferroni,
    normal quantile): the test below must be able to tell that rule from an honest one."""
    from statistics import NormalDist

    stops = 0
    for key, latency, hist in runs:
        leads = [
            (h[rung - 1] - hist[rung - 1])
            / math.hypot(binomial_se(h[rung - 1], N), binomial_se(hist[rung - 1], N))
            for k, lat, h in runs
            if k != key and lat <= latency
        ]
        stops += bool(leads) and max(leads) > NormalDist().inv_cdf(1 - alpha / len(leads))
    return stops


def test_false_stops_stay_below_alpha_when_no_architecture_is_better():
    rng = np.random.default_rng(0)
    trials = stops = naive = 0
    for _ in range(150):
        runs = synthetic_search(rng)
        order = list(rng.permutation(len(runs)))
        stopped_at = replay(runs, order)
        trials += len(runs)
        stops += sum(e < 12 for e in stopped_at.values())
        naive += binomial_only_stops(runs)
    assert stops / trials <= 0.05
    assert naive / trials > 0.05  # the split's noise alone would stop more: these histories are hard enough


@pytest.mark.parametrize("worst", [0.30])
def test_a_truly_dominated_trial_is_still_stopped(worst):
    """One architecture 30 points worse than all others at every epoch, the slowest of them, run last: the
    rule stops it at a rung in nearly every replay."""
    rng = np.random.default_rng(2)
    stopped = 0
    for _ in range(60):
        runs = synthetic_search(rng, worst=worst)
        runs[0] = (runs[0][0], 5.0, runs[0][2])  # slower than every other
        stopped += replay(runs, list(range(1, len(runs))) + [0])[0] < 12
    assert stopped >= 57


def test_plateau_rule():
    assert not plateaued([0.5, 0.6, 0.7], N, 2)  # too short to tell
    assert not plateaued([0.5, 0.6, 0.7, 0.8], N, 2)  # still rising by more than one SE
    assert plateaued([0.5, 0.8, 0.81, 0.805], N, 2)  # the last two epochs added less than one SE
    assert plateaued([3.0, 2.5, 2.499, 2.4995], N, 2, higher_is_better=False)  # a loss that stopped falling


# --------------------------------------------------------------------------------------------- bits per byte


def lm_peer(number, bpb, latency=1.0, key=None):
    return Peer(number, key or f"arch{number}", latency, 0.02, (bpb + 1, bpb + 0.5, bpb))


def lm_crowd(center, sd):
    return [
        lm_peer(100 + i, float(center + sd * z), latency=2.0)
        for i, z in enumerate(np.linspace(-1.6, 1.6, 19))
    ]


def test_bits_per_byte_lower_wins_beyond_the_noise_of_the_losses():
    lower = lm_peer(1, 3.40, latency=0.9)
    tight = lm_crowd(3.55, 0.01)
    v = dominated_at_rung(3, 3.60, N, "me", 1.0, 0.02, [lower, *tight], 0.05, higher_is_better=False, se=0.02)
    assert v.stop and "lower by 0.200 bits per byte" in v.reason
    # the same gap is noise when each loss is that noisy (its standard error, the floor) ...
    assert not dominated_at_rung(
        3, 3.60, N, "me", 1.0, 0.02, [lower, *tight], 0.05, higher_is_better=False, se=0.2
    ).stop
    # ... or when the study's losses spread that much at this epoch (seed noise), however small each one's
    wide = lm_crowd(3.55, 0.15)
    assert not dominated_at_rung(
        3, 3.60, N, "me", 1.0, 0.02, [lower, *wide], 0.05, higher_is_better=False, se=0.02
    ).stop


def test_bits_per_byte_never_stop_a_trial_for_a_higher_loss_elsewhere():
    worse = lm_peer(1, 4.50, latency=0.5)  # much faster but much worse: no reason to stop
    assert not dominated_at_rung(
        3, 3.60, N, "me", 1.0, 0.02, [worse, *lm_crowd(3.6, 0.001)], 0.05, higher_is_better=False, se=0.01
    ).stop


def test_without_a_measured_standard_error_a_relative_margin_stands_in():
    agreeing = lm_crowd(3.6, 0.0)  # no spread between the losses: 0.5% of the value is the floor
    near = lm_peer(1, 3.60 - 0.02, latency=0.9)  # inside 1.73 x sqrt(2) x 0.5% of 3.6 (0.044)
    assert not dominated_at_rung(
        3, 3.60, N, "me", 1.0, 0.02, [near, *agreeing], 0.05, higher_is_better=False
    ).stop
    far = lm_peer(1, 3.60 - 0.1, latency=0.9)
    assert dominated_at_rung(3, 3.60, N, "me", 1.0, 0.02, [far, *agreeing], 0.05, higher_is_better=False).stop


def test_the_rungs_of_early_stopping_multiply_from_the_first_below_the_planned_epochs():
    from explorer.spec import EarlyStoppingSpec, spec_from_dict

    assert EarlyStoppingSpec(min_epochs=3, reduction=2).rungs(20) == (3, 6, 12)
    assert EarlyStoppingSpec(min_epochs=2, reduction=3).rungs(18) == (2, 6)
    assert EarlyStoppingSpec(enabled=False).rungs(20) == ()
    doc = {
        "name": "e",
        "n_trials": 2,
        "task": {"name": "digits"},
        "space": {"d_model": [32], "n_layers": [1], "heads": [1, 2]},
    }
    # the spec's defaults are the dataclass's
    assert spec_from_dict(doc).early_stopping == EarlyStoppingSpec()
    on = spec_from_dict({**doc, "early_stopping": {"min_epochs": 4}}).early_stopping
    assert isinstance(on, EarlyStoppingSpec) and on.min_epochs == 4


def test_two_latencies_tie_within_their_spreads_combined():
    from explorer.spec import tie_tolerance

    assert tie_tolerance(0.03, 0.04) == pytest.approx(0.05)
    assert tie_tolerance(0.0, 0.0) == 0.0 and tie_tolerance(0.02, 0.1) == tie_tolerance(0.1, 0.02)
    assert tie_tolerance(0.02, 0.0) == pytest.approx(0.02)
