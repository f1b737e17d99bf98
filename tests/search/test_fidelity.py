"""Early stopping that is honest under noise: rungs, binomial margins, Bonferroni, never another seed."""

from __future__ import annotations

import numpy as np

from explorer.engine.measures import binomial_se
from explorer.engine.train import plateaued
from explorer.search.fidelity import Peer, dominated_at_rung

N = 270  # validation examples


def peer(number, acc, latency=1.0, key=None, spread=0.02):
    return Peer(number, key or f"arch{number}", latency, spread, (acc, acc, acc))


def test_a_clear_lead_by_a_faster_architecture_stops():
    v = dominated_at_rung(3, 0.50, N, "me", 1.0, 0.02, [peer(1, 0.80, latency=0.9)], alpha=0.05)
    assert v.stop and "trial #1" in v.reason and "standard errors" in v.reason


def test_a_lead_inside_the_noise_does_not_stop():
    se = np.hypot(binomial_se(0.80, N), binomial_se(0.78, N))
    assert 0.02 < 1.645 * se  # two points on 270 examples is noise
    assert not dominated_at_rung(3, 0.78, N, "me", 1.0, 0.02, [peer(1, 0.80, 0.9)], alpha=0.05).stop


def test_slower_architectures_and_other_seeds_never_count():
    slower = peer(1, 0.95, latency=2.0)
    same_arch = peer(2, 0.95, latency=0.5, key="me")
    assert not dominated_at_rung(3, 0.40, N, "me", 1.0, 0.02, [slower, same_arch], alpha=0.05).stop


def test_a_latency_tie_within_the_spread_counts_as_at_least_as_fast():
    nearly = peer(1, 0.95, latency=1.03, spread=0.05)  # 3% slower, inside a 5% spread
    assert dominated_at_rung(3, 0.40, N, "me", 1.0, 0.05, [nearly], alpha=0.05).stop


def test_more_peers_need_a_bigger_lead():
    """Bonferroni: a lead that stops a trial with one peer does not with many, since the best of many noisy
    peers leads by chance."""
    lead = 0.115
    one = [peer(1, 0.60 + lead, 0.9)]
    many = one + [peer(i, 0.30, 0.9) for i in range(2, 40)]
    assert dominated_at_rung(3, 0.60, N, "me", 1.0, 0.02, one, alpha=0.05).stop
    assert not dominated_at_rung(3, 0.60, N, "me", 1.0, 0.02, many, alpha=0.05).stop


def test_false_stops_stay_below_alpha_under_pure_noise():
    """Ten architectures, all truly 70% accurate: how often does noise alone stop one? Below alpha."""
    rng = np.random.default_rng(0)
    stops = 0
    for _ in range(2000):
        accs = rng.binomial(N, 0.7, size=10) / N
        peers = [peer(i, a, 0.9) for i, a in enumerate(accs[1:], start=1)]
        stops += dominated_at_rung(3, accs[0], N, "me", 1.0, 0.02, peers, alpha=0.05).stop
    assert stops / 2000 < 0.05


def test_plateau_rule():
    assert not plateaued([0.5, 0.6, 0.7], N, 2)  # too short to tell
    assert not plateaued([0.5, 0.6, 0.7, 0.8], N, 2)  # still rising by more than one SE
    assert plateaued([0.5, 0.8, 0.81, 0.805], N, 2)  # the last two epochs added less than one SE
    assert plateaued([3.0, 2.5, 2.499, 2.4995], N, 2, higher_is_better=False)  # a loss that stopped falling


# --------------------------------------------------------------------------------------------- bits per byte


def lm_peer(number, bpb, latency=1.0, key=None):
    return Peer(number, key or f"arch{number}", latency, 0.02, (bpb + 1, bpb + 0.5, bpb))


def test_bits_per_byte_lower_wins_beyond_the_standard_error_of_the_losses():
    lower = lm_peer(1, 3.40, latency=0.9)
    v = dominated_at_rung(3, 3.60, N, "me", 1.0, 0.02, [lower], 0.05, higher_is_better=False, se=0.02)
    assert v.stop and "lower by 0.200 bits per byte" in v.reason
    # the same gap is noise when the losses are that noisy: 0.2 < 1.645 x sqrt(2) x 0.2
    assert not dominated_at_rung(
        3, 3.60, N, "me", 1.0, 0.02, [lower], 0.05, higher_is_better=False, se=0.2
    ).stop


def test_bits_per_byte_never_stop_a_trial_for_a_higher_loss_elsewhere():
    worse = lm_peer(1, 4.50, latency=0.5)  # much faster but much worse: no reason to stop
    assert not dominated_at_rung(
        3, 3.60, N, "me", 1.0, 0.02, [worse], 0.05, higher_is_better=False, se=0.01
    ).stop


def test_without_a_measured_standard_error_a_relative_margin_stands_in():
    near = lm_peer(1, 3.60 - 0.02, latency=0.9)  # 0.02 below: inside 1.645 x sqrt(2) x 0.5% of 3.6 (0.042)
    assert not dominated_at_rung(3, 3.60, N, "me", 1.0, 0.02, [near], 0.05, higher_is_better=False).stop
    far = lm_peer(1, 3.60 - 0.1, latency=0.9)
    assert dominated_at_rung(3, 3.60, N, "me", 1.0, 0.02, [far], 0.05, higher_is_better=False).stop
