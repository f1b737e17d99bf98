"""The latency cache: measured latencies kept per architecture and measurement setup, so a second request for
the same figure need not measure again, as long as the stored figure can still be trusted.

One small JSON file per key (architecture + input + batch + threads + dtype + device + torch version), named by
the key's sha256 and written atomically, in ``$EXPLORER_CACHE_DIR`` (default ``~/.cache/explorer/latency``).
Each entry holds the measurement (median, IQR, the timed blocks, when, the 1-minute load average) and the
machine's state when it was stored (usable CPUs, load average, runnable processes).

**When an entry is reused** (:meth:`LatencyCache.problem` is empty), all of:

* it is younger than ``max_age_s`` (``EXPLORER_CACHE_MAX_AGE`` days, default 7; 0 never reuses);
* its spread is small: IQR / median at most ``max_spread`` (20%);
* the machine was not loaded while it was measured: load average per usable CPU at most ``max_load_per_cpu``
  (1.0, i.e. no more runnable work than CPUs on average);
* the machine is not much quieter now than it was then (per-CPU load no more than ``quieter_by`` = 0.5 lower),
  and has as many usable CPUs.

Otherwise the figure is measured again. **Which figure is kept** (:meth:`LatencyCache.put`): a new measurement
replaces the entry, except when the new one is itself doubtful (large spread or taken under load) and the old
one is still within its age, from a machine with as many CPUs, and faster. Load and contention only ever add
time, so of two doubtful figures of the same code on the same hardware the lower median is the one nearer the
unloaded truth; the old figure is then returned (marked cached) and the next request tries again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.errors import ConfigError, EnvironmentLackError
from explorer.limits import usable_cpus
from explorer.measurements import LatencyResult, load_average

log = logging.getLogger(__name__)

MAX_AGE_ENV = "EXPLORER_CACHE_MAX_AGE"
DAY_S = 86400.0
_ENTRY_NAME = re.compile(r"^[0-9a-f]{64}\.json$")  # what the cache writes; nothing else is ever removed
_TMP_PREFIX = ".tmp-"
_TMP_NAME = re.compile(r"^\.tmp-[a-z0-9_]{8}\.json$")  # exactly what tempfile.mkstemp names put's writes
_ENTRY_START = b'{\n "key": '  # how every entry put writes begins (json.dumps(..., indent=1))


def _default_cache_dir() -> Path:
    env = os.environ.get("EXPLORER_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "explorer" / "latency"


def _parse_time(stamp: str) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)


def result_age_s(result: LatencyResult, now: dt.datetime | None = None) -> float | None:
    """Seconds since ``result`` was measured (None when it carries no measurement time)."""
    when = _parse_time(result.measured_at)
    if when is None:
        return None
    now = now or dt.datetime.now(dt.timezone.utc)
    return max(0.0, (now - when).total_seconds())


def describe_age(seconds: float | None) -> str:
    """A short human age: ``40 s``, ``12 min``, ``5.2 h``, ``3.0 days`` (``unknown`` for None)."""
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / DAY_S:.1f} days"


# --------------------------------------------------------------------------------------------- the machine


def _runnable_others() -> int | None:
    """Processes runnable right now besides the reader (Linux ``/proc/stat``; None elsewhere)."""
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("procs_running"):
                    return max(0, int(line.split()[1]) - 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass(frozen=True)
class MachineState:
    """How busy the machine is: usable CPUs, the 1-minute load average and processes runnable right now."""

    cpus: int  # CPUs this process may use
    load: float | None  # 1-minute load average (None where the platform has none)
    runnable: int | None = None  # other processes runnable at that instant (Linux; a snapshot, noisy)

    @classmethod
    def now(cls) -> MachineState:
        return cls(cpus=usable_cpus(), load=load_average(), runnable=_runnable_others())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MachineState:
        load, runnable = d.get("load"), d.get("runnable")
        return cls(
            cpus=int(d["cpus"]),
            load=None if load is None else float(load),
            runnable=None if runnable is None else int(runnable),
        )


# --------------------------------------------------------------------------------------------- the policy


@dataclass(frozen=True)
class CachePolicy:
    """When a cached latency is reused (see the module docstring)."""

    max_age_s: float = 7 * DAY_S  # older entries are measured again (EXPLORER_CACHE_MAX_AGE, in days)
    max_spread: float = 0.20  # IQR / median above this: too noisy to reuse
    max_load_per_cpu: float = 1.0  # load average per usable CPU above this while measuring: under load
    quieter_by: float = 0.5  # per-CPU load this much lower now than at measurement: measure again

    @classmethod
    def from_env(cls) -> CachePolicy:
        """The default policy with ``max_age_s`` from ``EXPLORER_CACHE_MAX_AGE`` (days; a ConfigError if bad)."""
        raw = os.environ.get(MAX_AGE_ENV, "").strip()
        if not raw:
            return cls()
        try:
            days = float(raw)
        except ValueError:
            days = math.nan
        if not (math.isfinite(days) and days >= 0):
            raise ConfigError(
                f"{MAX_AGE_ENV}={raw!r} is not a number of days >= 0; set e.g. {MAX_AGE_ENV}=7 "
                "(0 measures every time)."
            )
        return cls(max_age_s=days * DAY_S)

    def measurement_problem(self, result: LatencyResult, machine: MachineState | None) -> str:
        """Why a measurement itself is doubtful (spread, load while measuring), or "" when it is not."""
        if result.median_ms > 0 and result.iqr_ms / result.median_ms > self.max_spread:
            return (
                f"its spread is {result.iqr_ms / result.median_ms:.0%} of the median "
                f"(more than {self.max_spread:.0%})"
            )
        load = result.load if result.load is not None else (machine.load if machine else None)
        cpus = machine.cpus if machine is not None else None
        if load is not None and cpus and load / cpus > self.max_load_per_cpu:
            return (
                f"it was measured under load ({load / cpus:.2f} per CPU on {cpus} CPUs, "
                f"more than {self.max_load_per_cpu:g})"
            )
        return ""


@dataclass(frozen=True)
class CacheEntry:
    """One stored figure with the machine's state when it was stored."""

    key: str
    result: LatencyResult  # as measured (``cached`` False)
    machine: MachineState | None  # None for entries written before the state was recorded
    path: Path

    def age_s(self, now: dt.datetime | None = None) -> float | None:
        return result_age_s(self.result, now)


# --------------------------------------------------------------------------------------------- the cache


class LatencyCache:
    """A directory of JSON files, one per key (named by the key's sha256), written atomically.

    Atomic writes (a temporary file in the same directory, then ``os.replace``) mean that workers sharing the
    directory never read a half-written file. A file that cannot be read back is treated as missing, so a
    corrupt entry is simply measured again and overwritten.

    Args:
        directory: where the files live; default ``$EXPLORER_CACHE_DIR`` or ``~/.cache/explorer/latency``.
        policy: when an entry is reused; default :meth:`CachePolicy.from_env`.
        machine: returns the machine's state now (tests pass a fixed one).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        policy: CachePolicy | None = None,
        machine: Callable[[], MachineState] = MachineState.now,
    ):
        self.directory = Path(directory).expanduser() if directory is not None else _default_cache_dir()
        self.policy = policy if policy is not None else CachePolicy.from_env()
        self.machine = machine

    def path(self, key: str) -> Path:
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    # ------------------------------------------------------------------------------------ reading

    def _read(self, path: Path) -> CacheEntry | None:
        try:
            data = json.loads(path.read_text())
            result = dataclasses.replace(LatencyResult.from_dict(data["result"]), cached=False)
            machine = MachineState.from_dict(data["machine"]) if data.get("machine") else None
            return CacheEntry(str(data["key"]), result, machine, path)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def lookup(self, key: str) -> CacheEntry | None:
        """The stored entry for ``key`` whatever its state, or None when absent or unreadable."""
        entry = self._read(self.path(key))
        return entry if entry is not None and entry.key == key else None

    def problem(self, entry: CacheEntry, now: MachineState | None = None) -> str:
        """Why ``entry`` must be measured again ("" when it can be reused); ``now`` defaults to the machine."""
        age = entry.age_s()
        if age is None:
            return "it has no measurement time"
        if age > self.policy.max_age_s:
            return f"it is {describe_age(age)} old (the limit is {describe_age(self.policy.max_age_s)})"
        if entry.machine is None:
            return "it was stored without the machine's state (by an older explorer)"
        if why := self.policy.measurement_problem(entry.result, entry.machine):
            return why
        now = now or self.machine()
        if entry.machine.cpus != now.cpus:
            return f"it was measured with {entry.machine.cpus} usable CPUs, {now.cpus} now"
        then_load = entry.result.load if entry.result.load is not None else entry.machine.load
        if (
            then_load is not None
            and now.load is not None
            and (then_load - now.load) / now.cpus > self.policy.quieter_by
        ):
            return f"the machine is quieter now (load {now.load:.2f} vs {then_load:.2f} when measured)"
        return ""

    def get(self, key: str) -> LatencyResult | None:
        """The stored result for ``key`` marked ``cached=True`` when it can be reused, else None (measure)."""
        entry = self.lookup(key)
        if entry is None or self.problem(entry):
            return None
        return dataclasses.replace(entry.result, cached=True)

    def entries(self) -> list[CacheEntry]:
        """Every readable entry, oldest first."""
        if not self.directory.is_dir():
            return []
        found = [e for p in self._listing() if _ENTRY_NAME.match(p.name) and (e := self._read(p))]
        return sorted(found, key=lambda e: (-(e.age_s() or math.inf), e.key))

    # ------------------------------------------------------------------------------------ writing

    def put(self, key: str, result: LatencyResult) -> LatencyResult:
        """Store a new measurement of ``key`` and return the figure to use (see the module docstring).

        Usually that is ``result`` itself. When ``result`` is doubtful and the stored one is faster, still young
        and from a machine with as many CPUs, the stored one is kept and returned (marked cached).
        """
        machine = self.machine()
        old = self.lookup(key)
        if (
            old is not None
            and self.policy.measurement_problem(result, machine)
            and old.result.median_ms <= result.median_ms
            and (old.age_s() or math.inf) <= self.policy.max_age_s
            and old.machine is not None
            and old.machine.cpus == machine.cpus
        ):
            return dataclasses.replace(old.result, cached=True)
        payload = json.dumps(
            {
                "key": key,
                "result": dataclasses.replace(result, cached=False).to_dict(),
                "machine": machine.to_dict(),
            },
            indent=1,
        )
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=_TMP_PREFIX, suffix=".json")
        except OSError as exc:  # a read-only or misplaced cache: the figure is used, just not kept
            log.warning("latency not cached: cannot write in %s (%s)", self.directory, exc.strerror)
            return dataclasses.replace(result, cached=False)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(payload)
            os.replace(tmp, self.path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return dataclasses.replace(result, cached=False)

    def clear(self, older_than_s: float | None = None) -> list[Path]:
        """Remove entries (all, or those measured more than ``older_than_s`` ago); return the removed files.

        Only files the cache wrote are touched: an entry (``<sha256>.json`` holding the key that hashes to its
        name) and the temporary file of an interrupted write (``.tmp-XXXXXXXX.json`` as :meth:`put` names them,
        empty or holding the start of an entry, older than an hour); anything else in the directory, whatever
        its name, is left alone. A folder that cannot be changed is one EnvironmentLackError.
        """
        if older_than_s is not None and not (math.isfinite(older_than_s) and older_than_s >= 0):
            raise ConfigError(
                f"the age limit must be a number of days >= 0 (--older-than), got {older_than_s!r} s."
            )
        if not self.directory.is_dir():
            return []
        removed: list[Path] = []
        now = time.time()
        for path in self._listing():
            if _TMP_NAME.match(path.name):
                if self._stale_tmp(path, now):
                    self._remove(path, removed, keep=False)
                continue
            entry = self._read(path) if _ENTRY_NAME.match(path.name) else None
            if entry is None or self.path(entry.key) != path:
                continue  # not an entry this cache wrote
            if older_than_s is not None and (entry.age_s() or 0.0) <= older_than_s:
                continue
            self._remove(path, removed)
        return removed

    def _listing(self) -> list[Path]:
        try:
            return sorted(p for p in self.directory.iterdir() if p.is_file())
        except OSError as exc:
            raise EnvironmentLackError(
                f"cannot read the latency cache folder {self.directory} ({exc.strerror}); check its "
                "permissions, or set EXPLORER_CACHE_DIR to a folder of your own."
            ) from None

    @staticmethod
    def _stale_tmp(path: Path, now: float) -> bool:
        """Whether ``path`` is an interrupted write of :meth:`put` (empty, or the start of an entry) over an hour
        old."""
        try:
            if now - path.stat().st_mtime <= 3600:
                return False
            with path.open("rb") as f:
                head = f.read(len(_ENTRY_START))
        except OSError:
            return False
        return _ENTRY_START.startswith(head)  # empty (killed before writing) or a prefix of an entry

    def _remove(self, path: Path, removed: list[Path], keep: bool = True) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise EnvironmentLackError(
                f"removed {len(removed)} cached latencies from {self.directory}, then could not remove "
                f"{path.name} ({exc.strerror}): the folder is read-only to you; clear it as its owner, or set "
                "EXPLORER_CACHE_DIR to a folder of your own."
            ) from None
        if keep:
            removed.append(path)
