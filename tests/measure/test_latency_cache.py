"""The latency cache's freshness rules: which stored figures are reused, which are measured again, which figure
is kept, and clearing that touches nothing but the cache's own files. Synthetic results and a fixed machine
state, so the rules are checked apart from this machine's load; one test measures for real (an entry
poisoned by load)."""

from __future__ import annotations

import datetime as dt
import json
import math
import os

import pytest
import torch

import explorer.measure._latency as latency
from explorer.errors import ConfigError
from explorer.layout import InputSpec, LatencyConfig, ModelConfig
from explorer.measure import CachePolicy, LatencyCache, describe_age, model_latency, result_age_s
from explorer.measure._latency import latency_key
from explorer.measure._latency_cache import MachineState
from explorer.measurements import LatencyResult

KEY = "d16_h2-4|tokens_T8|b2|t1|float32|cpu (test)|torch-test"
QUIET = MachineState(cpus=2, load=0.2, runnable=0)


def ago(**delta: float) -> str:
    return (dt.datetime.now(dt.timezone.utc) - dt.timedelta(**delta)).isoformat(timespec="seconds")


def result(ms: float = 5.0, *, spread: float = 0.05, load: float | None = 0.2, when: str | None = None):
    """A measurement of median ``ms`` with IQR ``spread * ms``, taken ``when`` at load average ``load``."""
    return LatencyResult(
        median_ms=ms,
        iqr_ms=ms * spread,
        batch_size=2,
        seq_len=8,
        threads=1,
        device="cpu (test)",
        dtype="float32",
        runs=10,
        samples_ms=tuple(ms * (1 + spread * (k - 4.5) / 9) for k in range(10)),
        measured_at=ago(minutes=5) if when is None else when,
        load=load,
    )


class Machine:
    """A machine whose state the test sets."""

    def __init__(self, state: MachineState = QUIET):
        self.state = state

    def __call__(self) -> MachineState:
        return self.state


def cache_at(tmp_path, machine: Machine | None = None, policy: CachePolicy | None = None) -> LatencyCache:
    return LatencyCache(tmp_path, policy=policy or CachePolicy(), machine=machine or Machine())


# ------------------------------------------------------------------------------------ reuse or measure again


def test_a_young_tight_quiet_entry_is_reused_and_marked_cached(tmp_path) -> None:
    cache = cache_at(tmp_path)
    stored = cache.put(KEY, result(5.0))
    assert not stored.cached
    hit = cache.get(KEY)
    assert hit is not None and hit.cached and hit.median_ms == 5.0
    assert 250 <= result_age_s(hit) <= 400  # measured five minutes ago
    doc = json.loads(cache.path(KEY).read_text())
    assert doc["machine"] == {"cpus": 2, "load": 0.2, "runnable": 0} and doc["result"]["load"] == 0.2
    assert len(doc["result"]["samples_ms"]) == 10


@pytest.mark.parametrize(
    ("stored", "then", "now", "why"),
    [
        (result(spread=0.45), QUIET, QUIET, "spread is 45% of the median"),
        (result(load=6.0), MachineState(2, 6.0), QUIET, "measured under load (3.00 per CPU"),
        (result(load=1.8), MachineState(2, 1.8), MachineState(2, 0.1), "quieter now"),
        (result(), MachineState(4, 0.2), QUIET, "measured with 4 usable CPUs, 2 now"),
        (result(when=ago(days=8)), QUIET, QUIET, "8.0 days old (the limit is 7.0 days)"),
        (result(when=""), QUIET, QUIET, "no measurement time"),
    ],
    ids=["spread", "loaded-then", "quieter-now", "other-cpus", "too-old", "undated"],
)
def test_doubtful_entries_are_measured_again(tmp_path, stored, then, now, why) -> None:
    machine = Machine(then)
    cache = cache_at(tmp_path, machine)
    cache.put(KEY, stored)
    machine.state = now
    entry = cache.lookup(KEY)
    assert entry is not None and why in cache.problem(entry)
    assert cache.get(KEY) is None


def test_a_machine_as_busy_or_busier_than_then_still_reuses(tmp_path) -> None:
    machine = Machine(MachineState(2, 1.5))
    cache = cache_at(tmp_path, machine)
    cache.put(KEY, result(load=1.5))  # 0.75 per CPU: not loaded
    for load in (1.5, 0.8, 4.0):  # the same, a little quieter (0.35 per CPU), much busier
        machine.state = MachineState(2, load)
        assert cache.get(KEY) is not None, load


def test_entries_written_without_the_machines_state_are_measured_again(tmp_path) -> None:
    cache = cache_at(tmp_path)
    legacy = {"key": KEY, "result": {**result().to_dict(), "cached": False}}  # what the first cache wrote
    tmp_path.joinpath(cache.path(KEY).name).write_text(json.dumps(legacy))
    assert "without the machine's state" in cache.problem(cache.lookup(KEY))
    assert cache.get(KEY) is None


def test_the_age_limit_comes_from_the_environment(tmp_path, monkeypatch) -> None:
    cache_at(tmp_path).put(KEY, result(when=ago(days=8)))
    monkeypatch.setenv("EXPLORER_CACHE_MAX_AGE", "10")
    assert LatencyCache(tmp_path, machine=Machine()).get(KEY) is not None
    monkeypatch.setenv("EXPLORER_CACHE_MAX_AGE", "0.5")
    assert CachePolicy.from_env().max_age_s == 43200
    monkeypatch.setenv("EXPLORER_CACHE_MAX_AGE", "0")
    assert LatencyCache(tmp_path, machine=Machine()).get(KEY) is None
    for bad in ("a week", "-1", "nan", "inf"):
        monkeypatch.setenv("EXPLORER_CACHE_MAX_AGE", bad)
        with pytest.raises(ConfigError, match="EXPLORER_CACHE_MAX_AGE=.* is not a number of days") as info:
            LatencyCache(tmp_path)
        assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------------ which figure is kept


@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        (result(5.0), result(9.0, spread=0.5), 5.0),  # doubtful and slower: the old figure stays
        (result(5.0), result(9.0, load=5.0), 5.0),  # measured under load and slower: the old figure stays
        (result(5.0), result(4.0, spread=0.5), 4.0),  # doubtful but faster: nearer the truth, it replaces
        (result(5.0), result(9.0), 9.0),  # a clean measurement always replaces
        (result(5.0, when=ago(days=9)), result(9.0, spread=0.5), 9.0),  # the old one has expired
    ],
    ids=["noisy-slower", "loaded-slower", "noisy-faster", "clean", "old-expired"],
)
def test_put_keeps_the_better_figure(tmp_path, old, new, kept) -> None:
    cache = cache_at(tmp_path)
    cache.put(KEY, old)
    used = cache.put(KEY, new)
    assert used.median_ms == kept and used.cached == (kept == old.median_ms)
    assert cache.lookup(KEY).result.median_ms == kept


def test_a_figure_from_a_machine_with_other_cpus_is_replaced(tmp_path) -> None:
    machine = Machine(MachineState(4, 0.2))
    cache = cache_at(tmp_path, machine)
    cache.put(KEY, result(5.0))
    machine.state = QUIET
    assert cache.put(KEY, result(9.0, spread=0.5)).median_ms == 9.0


# ------------------------------------------------------------------------------ an entry poisoned by load


FAST = LatencyConfig(batch_size=2, threads=1, min_run_time=0.05)
TOKENS = InputSpec(kind="tokens", seq_len=8, n_classes=3, vocab_size=11)
SMALL = ModelConfig(d_model=16, heads=(2, 4))


def test_a_figure_poisoned_by_load_is_measured_again_not_reused(tmp_path, monkeypatch) -> None:
    """The reported failure: a latency measured under load (7x the true one, load average 6 on 2 CPUs) was cached
    forever and reused by every later study. With the real cache and this machine's real state it is measured
    again, and the fresh, faster figure replaces it."""
    calls = []
    real = latency.time_forward
    monkeypatch.setattr(latency, "time_forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    fresh = model_latency(SMALL, TOKENS, FAST, torch.device("cpu"))
    key = latency_key(SMALL, TOKENS, FAST, torch.device("cpu"))
    poisoned = {**fresh.to_dict(), "median_ms": 7 * fresh.median_ms, "iqr_ms": 0.05 * 7 * fresh.median_ms}
    poisoned |= {"load": 6.0, "measured_at": ago(hours=1), "cached": False}
    cache = LatencyCache(tmp_path)
    cache.path(key).parent.mkdir(parents=True, exist_ok=True)
    cache.path(key).write_text(
        json.dumps({"key": key, "result": poisoned, "machine": {"cpus": 2, "load": 6.0, "runnable": 5}})
    )
    calls.clear()
    got = model_latency(SMALL, TOKENS, FAST, torch.device("cpu"), cache=cache)
    assert calls == [1] and not got.cached
    assert got.median_ms < 7 * fresh.median_ms
    assert cache.lookup(key).result.median_ms == got.median_ms  # the poisoned entry is gone


# ------------------------------------------------------------------------------------ listing and clearing


def test_entries_are_listed_oldest_first_and_unreadable_files_skipped(tmp_path) -> None:
    cache = cache_at(tmp_path)
    cache.put("a", result(when=ago(hours=1)))
    cache.put("b", result(when=ago(days=2)))
    cache.path("c").write_text("{ truncated")
    assert [e.key for e in cache.entries()] == ["b", "a"]
    assert cache_at(tmp_path / "missing").entries() == []


def test_clear_removes_only_the_caches_files(tmp_path) -> None:
    cache = cache_at(tmp_path)
    cache.put("young", result(when=ago(hours=1)))
    cache.put("old", result(when=ago(days=3)))
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    other = tmp_path / "settings.json"
    other.write_text("{}")
    removed = cache.clear(older_than_s=2 * 86400)
    assert removed == [cache.path("old")] and cache.lookup("young") is not None
    assert cache.clear() == [cache.path("young")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "settings.json"]
    with pytest.raises(ConfigError, match="number of days >= 0"):
        cache.clear(older_than_s=-1.0)
    assert cache_at(tmp_path / "missing").clear() == []


def test_describe_age() -> None:
    assert [describe_age(s) for s in (None, 40, 600, 5 * 3600, 3 * 86400)] == [
        "unknown",
        "40 s",
        "10 min",
        "5.0 h",
        "3.0 days",
    ]
    assert math.isclose(result_age_s(result(when=ago(days=1))), 86400, abs_tol=5)
    assert result_age_s(result(when="not a time")) is None


def test_a_cache_that_cannot_be_written_keeps_nothing_and_the_figure_is_used(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder would be")
    store = LatencyCache(blocked, machine=Machine())
    kept = store.put("k", result(1.0))
    assert kept.median_ms == 1.0 and not kept.cached
    assert blocked.read_text() == "a file where the cache folder would be"


def test_clear_removes_only_what_the_cache_wrote(tmp_path):
    store = LatencyCache(tmp_path, machine=Machine())
    store.put("mine", result(1.0))
    users = {".tmp-abcdefgh.json": "notes", f"{'0' * 64}.json": '{"mine": true}', ".tmp-x.json": ""}
    for name, text in users.items():
        (tmp_path / name).write_text(text)
        os.utime(tmp_path / name, (0, 0))  # old: an interrupted write would be removed
    (tmp_path / ".tmp-zzzzzzzz.json").write_text("")  # what put leaves when killed right after mkstemp
    os.utime(tmp_path / ".tmp-zzzzzzzz.json", (0, 0))
    removed = {p.name for p in store.clear()}
    assert removed == {store.path("mine").name}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(users)
