"""Every size and count a user can give has a limit, checked at the door: before anything is built, allocated
or written. The limits live here, in one table, with one way to go past each.

A limit is a named :class:`Limit`; ``LIMIT.check(value, label)`` returns the value or raises a
:class:`~explorer.errors.LimitError` naming the value, the limit and how to go past it: the environment
variable ``EXPLORER_MAX_<NAME>`` (``EXPLORER_MAX_D_MODEL=131072``), read each time a check runs, so a user who
means a larger value sets it for one command. A malformed override is itself a one-line error.

==================  =====================  =================================================================
limit               default                what it bounds
==================  =====================  =================================================================
``D_MODEL``         65,536                 a model width (``d_model``), in a spec or an option
``MLP_WIDTH``       262,144                MLP hidden units of one layer (``mlp_ratio x d_model``)
``HEAD_DIM``        4,096                  the width of one head (``head_dim``, ``d_k``)
``LAYERS``          256                    a model's depth
``HEADS``           4,096                  heads (and key/value heads) in one layer
``CANDIDATES``      256                    values in one list of a spec (``heads = [...]``, ``d_model``...)
``LAYOUTS``         1,000,000                architectures a search space expands to (counted, not listed)
``TRIALS``          100,000                a study's search trials (``n_trials``, ``--n-trials``)
``EPOCHS``          10,000                 epochs of one training run
``STEPS``           100,000                optimizer steps of one recovery of a shrunk model
``SEQ_LEN``         65,536                 positions of one example (sequence length, decoding context)
``BATCH``           65,536                 examples in one batch (training, timing, benchmarks)
``VOCAB``           1,048,576              token ids (the vocabulary is the largest id + 1)
``CLASSES``         65,536                 labels (the classes are the largest label + 1)
``EXAMPLES``        10,000,000             examples a generated task makes
``WORKERS``         4 x usable CPUs        worker processes of one command
``THREADS``         4 x usable CPUs        CPU threads of one process
``RUN_TIME_S``      3,600                  seconds a benchmark times one implementation (``--min-run-time``)
``FILE_MB``         1 (MB of 10^6 bytes)   a spec or run config, read whole
``MEMORY_MB``       the machine's          what one command may plan to hold: available memory (the
                    available memory       least of /proc/meminfo's MemAvailable, a cgroup's and
                                           RLIMIT_AS's room), or the device's free memory on CUDA
==================  =====================  =================================================================

:func:`check_memory` compares an estimate (explorer.model._footprint estimates a model's training and inference
bytes) with ``MEMORY_MB``; :func:`check_file_size` refuses a file above a byte limit before it is read.
Library code raises; only the command line prints.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from explorer.errors import LimitError

if TYPE_CHECKING:  # torch is imported where CUDA memory is asked for: this module is read by every command
    import torch

__all__ = [
    "BATCH",
    "CANDIDATES",
    "CLASSES",
    "D_MODEL",
    "EPOCHS",
    "EXAMPLES",
    "FILE_MB",
    "HEADS",
    "HEAD_DIM",
    "LAYERS",
    "LAYOUTS",
    "LIMITS",
    "MB",
    "MEMORY_MB",
    "MLP_WIDTH",
    "RUN_TIME_S",
    "SEQ_LEN",
    "STEPS",
    "THREADS",
    "TRIALS",
    "VOCAB",
    "WORKERS",
    "Limit",
    "available_memory",
    "check_file_size",
    "check_memory",
    "usable_cpus",
]

MB = 10**6  # what the *_MB limits count in
_MIB = 2**20


def usable_cpus() -> int:
    """The CPUs this process may run on (containers, taskset), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _proc_kib(path: str, field: str) -> int | None:
    """A ``Field:  N kB`` line of a /proc file, in bytes (None where there is no such file or line)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """Bytes left under a cgroup v2 memory limit (None where none is set or readable)."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text().strip()))
    except (OSError, ValueError):
        return None


def _address_space_room() -> int | None:
    """Bytes of address space left under RLIMIT_AS (None when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    used = _proc_kib("/proc/self/status", "VmSize") or 0
    return max(0, soft - used)


def available_memory(device: torch.device | None = None) -> int:
    """Bytes this process can still take: on a CUDA ``device`` its free memory; otherwise (None: the CPU) the
    least of the machine's available memory, a cgroup's room and RLIMIT_AS's room (1 GiB where none can be
    read)."""
    if device is not None and device.type == "cuda":
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.mem_get_info(0 if device.index is None else device.index)[0])
    candidates = [_proc_kib("/proc/meminfo", "MemAvailable"), _cgroup_room(), _address_space_room()]
    if candidates[0] is None:
        try:
            candidates[0] = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            candidates[0] = 2**30
    return min(c for c in candidates if c is not None)


@dataclass(frozen=True)
class Limit:
    """One limit: its name (the environment variable is ``EXPLORER_MAX_<NAME>``), its default (a number, or a
    function of the machine), and why it is there (said in the error)."""

    name: str
    default: int | Callable[[], int]
    why: str

    @property
    def env(self) -> str:
        return f"EXPLORER_MAX_{self.name}"

    def value(self) -> int:
        """The limit in force: ``$EXPLORER_MAX_<NAME>`` when set, else the default."""
        raw = os.environ.get(self.env, "").strip().replace("_", "")
        if raw:
            if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
                raise LimitError(
                    f"{self.env}={os.environ[self.env]!r} is not a whole number >= 1; set it to the limit you "
                    "want, or unset it for the default."
                )
            return int(raw)
        return self.default() if callable(self.default) else self.default

    def check(self, value: int | float, label: str, fix: str = "lower it") -> int | float:
        """``value`` if it is within the limit, else a LimitError naming ``label``, the value, the limit, the
        reason, and ``fix`` or the override."""
        if isinstance(value, float) and not math.isfinite(value):
            raise LimitError(f"{label} is {value}; give a finite number.")
        limit = self.value()
        if value > limit:
            raise LimitError(
                f"{label} is {_num(value)}, above the limit of {_num(limit)} ({self.why}); {fix}, or set "
                f"{self.env}={_num(value, plain=True)} if you mean it."
            )
        return value


def _num(value: int | float, plain: bool = False) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    if abs(value) >= 10**18:
        return f"{value:.3g}"
    return str(int(value)) if plain else f"{int(value):,}"


def _cpus_times_4() -> int:
    return 4 * usable_cpus()


def _memory_mb() -> int:
    return max(1, available_memory() // MB)


D_MODEL = Limit("D_MODEL", 65_536, "wider than any model explorer builds")
MLP_WIDTH = Limit("MLP_WIDTH", 262_144, "MLP hidden units (mlp_ratio x d_model) of one layer")
HEAD_DIM = Limit("HEAD_DIM", 4_096, "wider than any attention head in use")
LAYERS = Limit("LAYERS", 256, "deeper than any model explorer builds")
HEADS = Limit("HEADS", 4_096, "more heads than any layer in use")
CANDIDATES = Limit("CANDIDATES", 256, "values in one list of a spec")
LAYOUTS = Limit(
    "LAYOUTS", 1_000_000, "architectures one search space may expand to; a sampler may list them all"
)
TRIALS = Limit("TRIALS", 100_000, "search trials of one study")
EPOCHS = Limit("EPOCHS", 10_000, "epochs of one training run")
STEPS = Limit("STEPS", 100_000, "optimizer steps of one recovery of a shrunk model")
SEQ_LEN = Limit("SEQ_LEN", 65_536, "positions of one example")
BATCH = Limit("BATCH", 65_536, "examples in one batch")
VOCAB = Limit("VOCAB", 2**20, "the embedding has one row per token id up to the largest")
CLASSES = Limit("CLASSES", 2**16, "the classifier has one output per label up to the largest")
EXAMPLES = Limit("EXAMPLES", 10_000_000, "examples one generated task makes")
WORKERS = Limit(
    "WORKERS", _cpus_times_4, f"4 worker processes per usable CPU; this machine has {usable_cpus()}"
)
THREADS = Limit("THREADS", _cpus_times_4, f"4 threads per usable CPU; this machine has {usable_cpus()}")
RUN_TIME_S = Limit("RUN_TIME_S", 3_600, "seconds a benchmark times one implementation")
FILE_MB = Limit("FILE_MB", 1, "MB a spec or run config may take; it is read whole")
MEMORY_MB = Limit("MEMORY_MB", _memory_mb, "MB of memory available to this command")

LIMITS = (
    D_MODEL,
    MLP_WIDTH,
    HEAD_DIM,
    LAYERS,
    HEADS,
    CANDIDATES,
    LAYOUTS,
    TRIALS,
    EPOCHS,
    STEPS,
    SEQ_LEN,
    BATCH,
    VOCAB,
    CLASSES,
    EXAMPLES,
    WORKERS,
    THREADS,
    RUN_TIME_S,
    FILE_MB,
    MEMORY_MB,
)


def check_memory(estimate: int, what: str, fix: str, device: torch.device | None = None) -> int:
    """``estimate`` (bytes ``what`` would take) if it fits the memory limit, else a LimitError naming both and
    ``fix``. On CUDA the limit is the device's free memory unless ``EXPLORER_MAX_MEMORY_MB`` is set."""
    overridden = bool(os.environ.get(MEMORY_MB.env, "").strip())
    budget = MEMORY_MB.value() * MB if overridden else available_memory(device)
    if estimate > budget:
        where = "on the device" if device is not None and device.type == "cuda" else "here"
        raise LimitError(
            f"{what} needs about {_size(estimate)}, but {_size(budget)} of memory is available {where}; "
            f"{fix}, or set {MEMORY_MB.env}={_num(-(-estimate // MB), plain=True)} if you mean it."
        )
    return estimate


def _size(n: int) -> str:
    if n >= 10**15:
        return f"about 10^{len(str(int(n))) - 1} bytes"
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1000:,.1f} kB"


def check_file_size(path: str | os.PathLike[str], what: str) -> int:
    """The size of ``path`` if it is at most ``FILE_MB``, else a LimitError; checked before the file is read
    whole. A file that is not a regular file (a pipe, ``/dev/zero``) is refused: it cannot be sized first."""
    import stat

    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return 0  # the reader names a missing or unreadable file itself
    if stat.S_ISDIR(st.st_mode):
        return 0  # the reader says it is a folder
    if not stat.S_ISREG(st.st_mode):
        raise LimitError(f"{what} {str(p)!r} is not a regular file (a device or a pipe); give a file.")
    limit = FILE_MB.value() * MB
    if st.st_size > limit:
        raise LimitError(
            f"{what} {str(p)!r} is {_size(st.st_size)}, above the {_size(limit)} explorer reads whole; give a "
            f"smaller file, or set {FILE_MB.env}={_num(-(-st.st_size // MB), plain=True)} if you mean it."
        )
    return st.st_size
