"""Hostile input through the command line: each case is a careless or malicious invocation, answered with one
line on stderr, its documented exit code, no traceback, and the disk exactly as it was.

The cases run through click's CliRunner in this process (what a shell call does, without the interpreter's
start-up), each under two watchdogs: a wall-clock alarm and a ceiling on the process's address space
(RLIMIT_AS lowered to what the process holds plus 1 GiB for the case, then restored), so a blow-up fails its
case instead of the machine. A few cases need a real process (a read-only folder seen by another user, the
resource blow-ups end to end): they run ``python -m explorer`` under the same ceilings. Before and after each
case the test folder is hashed, file by file (a SQLite file's write-ahead log and index aside) and database by
database (their content, read without changing them), and the two must be equal.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import optuna
import pytest
from click.testing import CliRunner

from explorer.cli import main
from explorer.storage import open_storage
from tests.fixtures import make_study

CASE_SECONDS = 20  # the wall-clock watchdog of one case (10 s is the aim on an idle machine)
CASE_BYTES = 2**30  # address space a case may add to what the process already holds
PROCESS_BYTES = 4 * 2**30  # address-space ceiling of a case run as its own process (torch maps ~0.7 GiB)
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    """One invocation: ``args`` (``{w}`` is the test folder), the exit code and a pattern the one stderr line
    must match (code 0: nothing on stderr but what ``match`` allows)."""

    id: str
    args: tuple[str, ...]
    code: int
    match: str = ""
    env: dict[str, str] = field(default_factory=dict)
    process: bool = False  # run as its own process (python -m explorer)
    stdout_empty: bool = True


def case(id: str, args: str | tuple[str, ...], code: int = 3, match: str = "", **kw) -> Case:
    return Case(id, tuple(args.split()) if isinstance(args, str) else args, code, match, **kw)


# --------------------------------------------------------------------------------------------- the folder

TINY = {
    "name": "probe",
    "n_trials": 4,
    "bench": False,
    "task": {"name": "digits", "epochs": 1},
    "space": {"d_model": [16], "n_layers": [1], "heads": [1, 2]},
    "latency": {"device": "cpu", "batch_size": 4},
    "finalists": {"enabled": False},
}
# make_study's stored spec, written as a file (the same study, with another total)
SYNTH = {
    "name": "synth",
    "n_trials": 3,
    "sampler": "random",
    "task": {"name": "digits", "epochs": 10},
    "space": {
        "d_model": [64, 128, 256],
        "n_layers": [2, 4],
        "heads": [1, 2, 4, 8, 16, 32],
        "min_dk": 2,
        "families": ["uniform", "increasing", "decreasing"],
        "mlp_ratio": [2.0],
    },
    "latency": {"device": "cpu", "batch_size": 64},
    "finalists": {"seeds": 3, "folds": 1},
}


def toml_text(doc: dict, table: str = "") -> str:
    """A TOML document for ``doc`` (scalars and lists first, then one [table] per dict)."""

    def value(v: object) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v) if isinstance(v, str) else repr(v)

    lines = [f"[{table}]"] if table else []
    lines += [f"{k} = {value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    tables = [toml_text(v, f"{table}.{k}" if table else k) for k, v in doc.items() if isinstance(v, dict)]
    return "\n".join(lines + tables) + "\n"


def merged(base: dict, changes: dict) -> dict:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for key, v in changes.items():
        if isinstance(v, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **v}
        else:
            out[key] = v
    return out


SPECS = {  # file stem -> changes to TINY (written as specs/<stem>.toml)
    "wide": {"space": {"d_model": [10**9], "heads": [1]}},
    "wider": {"space": {"d_model": [10**18], "heads": [1]}},
    "deep": {"space": {"n_layers": [10**6]}},
    "many-heads": {"space": {"heads": list(range(1, 100_001))}},
    "big-head": {"space": {"heads": [10**9]}},
    "huge-head-dim": {"space": {"head_dim": [10**9]}},
    "free": {"space": {"d_model": [256], "n_layers": [16], "heads": [1, 2, 4, 8, 16], "families": ["free"]}},
    "free-kv": {
        "space": {
            "d_model": [256],
            "n_layers": [12],
            "heads": [2, 4, 8, 16],
            "kv_heads": [1, 2, 4],
            "kv_per_layer": True,
            "families": ["free"],
        }
    },
    "trials": {"n_trials": 10**12},
    "no-trials": {"n_trials": 0},
    "epochs": {"task": {"epochs": 10**9}},
    "batch": {"task": {"batch_size": 10**9}},
    "mlp": {"space": {"mlp_ratio": [1e308]}},
    "lr-inf": {"space": {"lr": float("inf")}},
    "seed-neg": {"seed": -1},
    "seed-big": {"seed": 2**40},
    "lat-threads": {"latency": {"threads": 100_000}},
    "lat-seq": {"latency": {"seq_len": 10**9}},
    "lat-batch": {"latency": {"batch_size": 10**9}},
    "lat-time": {"latency": {"min_run_time": 1e9}},
    "unknown-key": {"surprise": 1},
    "wrong-type": {"space": {"d_model": "wide"}},
    "bad-name": {"name": "../../etc"},
    "relations-rows": {"task": {"name": "relations", "options": {"n_samples": 10**12}}},
    "task-missing": {"task": {"name": "missing.npz"}},
    "memory": {"space": {"d_model": [16384], "n_layers": [64], "heads": [1]}, "task": {"batch_size": 4096}},
    "finalist-seeds": {"finalists": {"seeds": 10**9}},
    "min-dk": {"space": {"min_dk": 10**9}},
    "heads-zero": {"space": {"heads": [0, 1]}},
    "families-bad": {"space": {"families": ["spiral"]}},
    "nan-lr": {"space": {"lr": [1e-4, float("nan")]}},
}


def _write_files(w: Path) -> None:
    """Every hostile file the cases name."""
    specs = w / "specs"
    specs.mkdir()
    (specs / "ok.toml").write_text(toml_text(TINY))
    for stem, changes in SPECS.items():
        (specs / f"{stem}.toml").write_text(toml_text(merged(TINY, changes)))
    (specs / "synth-fewer.toml").write_text(toml_text(SYNTH))
    (specs / "synth-same.toml").write_text(toml_text(merged(SYNTH, {"n_trials": 30})))
    (specs / "synth-changed.toml").write_text(toml_text(merged(SYNTH, {"space": {"heads": [1, 2, 4]}})))
    (specs / "plain.toml").write_text(toml_text(merged(TINY, {"name": "plain"})))
    (specs / "nested.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    (specs / "bom.toml").write_text("\ufeff" + toml_text(merged(TINY, {"n_trials": 0})), encoding="utf-8")
    (specs / "binary.toml").write_bytes(bytes(range(256)) * 4)
    (specs / "huge.toml").write_text("# " + "x" * (2 * 10**6) + "\n" + toml_text(TINY))
    (specs / "folder.toml").mkdir()
    configs = w / "configs"
    configs.mkdir()
    (configs / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    (configs / "garbage.json").write_text("{not json")
    (configs / "huge.json").write_text(json.dumps({"pad": "x" * (2 * 10**6)}))
    wide = {
        "explorer_run_config": 1,
        "task": "digits",
        "task_options": {},
        "model": {"d_model": 10**9, "heads": [1, 1]},
        "train": {"epochs": 1},
    }
    (configs / "wide.json").write_text(json.dumps(wide))
    (configs / "deep.json").write_text(json.dumps({**wide, "model": {"d_model": 16, "heads": [1] * 100_000}}))
    (configs / "inf.json").write_text(
        '{"explorer_run_config": 1, "task": "digits", "model": {"d_model": 1e400, "heads": [1]}, "train": {}}'
    )
    _write_models(w / "models")
    _write_data(w / "data")


def _write_models(m: Path) -> None:
    import pickle

    import torch

    m.mkdir()
    (m / "text.pt").write_text("hello, I am not a model\n")
    (m / "empty.pt").write_bytes(b"")
    (m / "folder.pt").mkdir()
    (m / "model.txt").write_text("x")
    (m / "garbage.pt2").write_bytes(b"PK\x03\x04 not really a zip")
    (m / "garbage.onnx").write_bytes(b"\x08\x07 not onnx")
    (m / "raw.pt").write_bytes(pickle.dumps({"a": 1}, protocol=4))
    (m / "evil.pt").write_bytes(pickle.dumps(Path("/etc/passwd")))  # a class from outside torch's allowlist
    meta = {
        "explorer_export": 1,
        "input": {"kind": "tokens", "seq_len": 8, "n_classes": 2, "vocab_size": 10},
        "run_config": {"model": {"d_model": 10**9, "heads": [1]}},
    }
    torch.save({"explorer": json.dumps(meta), "state_dict": {}}, m / "huge-model.pt")
    meta["run_config"]["model"] = {"d_model": 2**14, "heads": [16] * 64}  # 200 billion parameters
    torch.save({"explorer": json.dumps(meta), "state_dict": {}}, m / "big-model.pt")


def _npy_header(shape: tuple[int, ...], dtype: str = "<i8") -> bytes:
    """A .npy v1.0 header declaring ``shape`` (no data follows)."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode("latin1")
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def _write_data(d: Path) -> None:
    d.mkdir()
    with zipfile.ZipFile(d / "rows.npz", "w") as z:  # an .npz declaring 8e12 rows of int64 tokens
        z.writestr("X.npy", _npy_header((8 * 10**12, 4)))
        z.writestr("y.npy", _npy_header((8 * 10**12,)))
    with zipfile.ZipFile(d / "long.npz", "w") as z:
        z.writestr("X.npy", _npy_header((10, 10**9), "|u1"))
        z.writestr("y.npy", _npy_header((10,)))
    np.savez(d / "objects.npz", X=np.array([object()] * 20, dtype=object), y=np.zeros(20, dtype=np.int64))
    np.savez(d / "floats-y.npz", X=np.zeros((30, 4), dtype=np.int64), y=np.linspace(0, 1, 30))
    (d / "text.npz").write_text("not a zip")
    np.savez(
        d / "extra.npz", X=np.zeros((30, 4), dtype=np.int64), y=np.zeros(30, dtype=np.int64), Z=np.ones(1)
    )
    root = d / "textroot"  # a text corpus folder holding a pipe named like a source file
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    os.mkfifo(root / "pipe.py")
    ids = np.zeros((30, 4), dtype=np.int64)
    ids[0, 0] = 2**40
    np.savez(d / "ids.npz", X=ids, y=np.arange(30) % 2)


def _write_databases(w: Path) -> None:
    studies = w / "studies"
    studies.mkdir()
    storage = open_storage(f"sqlite:///{studies / 'synth.db'}", heartbeat=False)
    make_study(30, storage=storage, name="synth")
    storage.engine.dispose()  # its log checkpointed now, not when a later case's garbage collection closes it
    plain = optuna.create_study(study_name="plain", storage=f"sqlite:///{w / 'plain.db'}")
    plain.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    optuna.create_study(study_name="probe", storage=f"sqlite:///{w / 'plain.db'}")  # a foreign "probe"
    with sqlite3.connect(w / "other.db") as con:  # another program's database
        con.execute("create table notes (body text)")
        con.execute("insert into notes values ('mine')")
    (w / "junk.db").write_text("not a database\n")
    cache = w / "cache"
    cache.mkdir()
    (cache / ".tmp-abcdefgh.json").write_text("my notes, not a cache file\n")
    (cache / f"{'0' * 64}.json").write_text('{"mine": true}\n')
    old = time.time() - 7 * 86400
    for p in cache.iterdir():
        os.utime(p, (old, old))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    w = tmp_path_factory.mktemp("hostile")
    _write_files(w)
    _write_databases(w)
    os.chmod(w, 0o755)  # readable by the other user some cases run as
    return w


# --------------------------------------------------------------------------------------------- the disk


def _db_content(path: Path) -> str:
    """A SQLite file's logical content, read without creating or changing anything beside it."""
    mode = "mode=ro" if Path(f"{path}-wal").exists() else "immutable=1"
    con = sqlite3.connect(f"file:{path}?{mode}", uri=True)
    try:
        return hashlib.sha256("\n".join(con.iterdump()).encode()).hexdigest()
    finally:
        con.close()


def disk_state(w: Path) -> dict[str, str]:
    """Every file's bytes (a database by its content and its bytes; its write-ahead log and index, which a reader
    may open and close, by the content they hold)."""
    state = {}
    for p in sorted(w.rglob("*")):
        rel = str(p.relative_to(w))
        if p.is_dir():
            state[rel] = "dir"
        elif not p.is_file():
            state[rel] = "special"  # a pipe: reading it would block
        elif p.name.endswith(("-wal", "-shm")):
            continue  # a connection's log and index: what they hold is in the content below
        elif p.suffix == ".db" and p.read_bytes()[:16] == b"SQLite format 3\x00":
            state[rel] = _db_content(p) + hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            state[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return state


# --------------------------------------------------------------------------------------------- watchdogs


class Watchdog(BaseException):
    """A case ran past its time (a BaseException: nothing in explorer may swallow it)."""


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def invoke(c: Case, w: Path, monkeypatch: pytest.MonkeyPatch):
    """Run ``c`` through CliRunner under the two watchdogs; (exit code, stdout, stderr, seconds)."""
    monkeypatch.chdir(w)
    for key, value in {"EXPLORER_CACHE_DIR": str(w / "cache"), **c.env}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("EXPLORER_STORAGE", raising=False) if "EXPLORER_STORAGE" not in c.env else None
    args = [a.format(w=w) for a in c.args]

    def alarm(_signum, _frame):
        raise Watchdog(f"{c.id}: still running after {CASE_SECONDS} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    ceiling = _vm_bytes() + CASE_BYTES
    resource.setrlimit(
        resource.RLIMIT_AS, (ceiling if hard == resource.RLIM_INFINITY else min(ceiling, hard), hard)
    )
    t0 = time.perf_counter()
    try:
        result = CliRunner().invoke(main, args, catch_exceptions=True)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(result.exception))
        return result.exit_code, result.stdout, result.stderr + tb, time.perf_counter() - t0
    return result.exit_code, result.stdout, result.stderr, time.perf_counter() - t0


def _as_other_user() -> None:
    """In the child (root only): become nobody, so a folder we made read-only is read-only to it."""
    os.setgid(65534)
    os.setuid(65534)


def run_process(c: Case, w: Path, other_user: bool = False):
    """Run ``c`` as ``python -m explorer`` under RLIMIT_AS and a timeout; (code, stdout, stderr, seconds)."""
    env = {k: v for k, v in os.environ.items() if k != "EXPLORER_STORAGE"}
    env |= {"EXPLORER_CACHE_DIR": str(w / "cache"), "PYTHONPATH": str(ROOT), **c.env}

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (PROCESS_BYTES, PROCESS_BYTES))
        if other_user:
            _as_other_user()

    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "explorer", *(a.format(w=w) for a in c.args)],
        cwd=w,
        env=env,
        capture_output=True,
        text=True,
        timeout=CASE_SECONDS * 3,
        preexec_fn=limits,
    )
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - t0


def check(c: Case, code: int, out: str, err: str, seconds: float) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    shown = f"{c.id}: exit {code}, {seconds:.1f} s, stderr:\n{err}\nstdout:\n{out[:500]}"
    assert "Traceback" not in err, shown
    assert code == c.code, shown
    if c.code == 0:
        assert all(re.search(c.match, line) for line in lines), shown
    else:
        assert len(lines) == 1, shown
        assert lines[0].startswith("error: "), shown
        assert re.search(c.match, lines[0]), shown
        if c.stdout_empty:
            assert out == "", shown
    assert "hunter2" not in out + err, shown  # a password never printed


# --------------------------------------------------------------------------------------------- the cases
# One case a line, however long (the formatter would spread each over six).


SPEC_CASES = [
    case("spec-dev-zero", "study run /dev/zero", match="not a regular file"),
    case("spec-missing", "study run specs/missing.toml", match="no spec file"),
    case("spec-folder", "study run specs/folder.toml", 2, match="is a directory"),
    case(
        "spec-huge",
        "study run specs/huge.toml",
        match="above the 1.0 MB explorer reads whole.*EXPLORER_MAX_FILE_MB",
    ),
    case("spec-nested", "study run specs/nested.toml", match="nests tables or arrays too deeply"),
    case("spec-bom", "study run specs/bom.toml", match="'n_trials' in the top level must be an integer >= 1"),
    case("spec-binary", "study run specs/binary.toml", match="cannot read spec|not valid TOML"),
    case(
        "spec-wide",
        "study run specs/wide.toml",
        match=r"d_model' in \[space\] is 1,000,000,000, above the limit of 65,536.*EXPLORER_MAX_D_MODEL=1000000000",
    ),
    case("spec-wider", "study run specs/wider.toml", match="above the limit of 65,536"),
    case(
        "spec-deep",
        "study run specs/deep.toml",
        match=r"'n_layers' in \[space\] is 1,000,000, above the limit of 256",
    ),
    case(
        "spec-many-heads",
        "study run specs/many-heads.toml",
        match=r"the list 'heads' in \[space\] \(its length\) is 100,000, above the limit of 256.*EXPLORER_MAX_CANDIDATES",
    ),
    case(
        "spec-big-head",
        "study run specs/big-head.toml",
        match="'heads' in .space. is 1,000,000,000, above the limit of 4,096",
    ),
    case(
        "spec-head-dim", "study run specs/huge-head-dim.toml", match="'head_dim' in .space. is 1,000,000,000"
    ),
    case(
        "spec-free",
        "study run specs/free.toml",
        match=r"search space \(\[space\]\) counted in architectures is [\d,]+, above the limit of 1,000,000.*EXPLORER_MAX_LAYOUTS",
    ),
    case(
        "spec-free-kv", "study run specs/free-kv.toml", match="counted in architectures is .*above the limit"
    ),
    case(
        "spec-trials",
        "study run specs/trials.toml",
        match="'n_trials' at the top level is 1,000,000,000,000, above the limit of 100,000",
    ),
    case(
        "spec-no-trials",
        "study run specs/no-trials.toml",
        match="'n_trials' in the top level must be an integer >= 1",
    ),
    case("spec-epochs", "study run specs/epochs.toml", match=r"'epochs' in \[task\] is 1,000,000,000"),
    case("spec-batch", "study run specs/batch.toml", match=r"'batch_size' in \[task\] is 1,000,000,000"),
    case("spec-mlp", "study run specs/mlp.toml", match="MLP width"),
    case("spec-lr-inf", "study run specs/lr-inf.toml", match="'lr' in .space. must be a number > 0"),
    case("spec-nan-lr", "study run specs/nan-lr.toml", match="'lr' in .space."),
    case("spec-seed-neg", "study run specs/seed-neg.toml", match="'seed'"),
    case("spec-seed-big", "study run specs/seed-big.toml", match="seeds run from 0 to 2..31 - 1"),
    case(
        "spec-lat-threads",
        "study run specs/lat-threads.toml",
        match=r"'threads' in \[latency\] is 100,000, above the limit",
    ),
    case("spec-lat-seq", "study run specs/lat-seq.toml", match=r"'seq_len' in \[latency\] is 1,000,000,000"),
    case("spec-lat-batch", "study run specs/lat-batch.toml", match=r"'batch_size' in \[latency\]"),
    case(
        "spec-lat-time",
        "study run specs/lat-time.toml",
        match=r"'min_run_time' in \[latency\] is 1,000,000,000, above the limit of 3,600",
    ),
    case("spec-unknown-key", "study run specs/unknown-key.toml", match="unknown key 'surprise'"),
    case(
        "spec-wrong-type",
        "study run specs/wrong-type.toml",
        match="'d_model' in .space. must be a non-empty list",
    ),
    case("spec-bad-name", "study run specs/bad-name.toml", match="Study name '../../etc' is invalid"),
    case(
        "spec-relations-rows",
        "study run specs/relations-rows.toml",
        match="relations option n_samples is 1,000,000,000,000, above the limit",
    ),
    case("spec-task-missing", "study run specs/task-missing.toml", match="missing.npz: no such file"),
    case(
        "spec-memory",
        "study run specs/memory.toml",
        match="the study's largest model .* needs about .* of memory is available.*EXPLORER_MAX_MEMORY_MB",
    ),
    case(
        "spec-finalist-seeds",
        "study run specs/finalist-seeds.toml",
        match=r"'seeds' in \[finalists\] is 1,000,000,000",
    ),
    case("spec-min-dk", "study run specs/min-dk.toml", match=r"'min_dk' in \[space\] is 1,000,000,000"),
    case(
        "spec-heads-zero",
        "study run specs/heads-zero.toml",
        match="'heads' in .space. must be a non-empty list of integers >= 1",
    ),
    case(
        "spec-families-bad",
        "study run specs/families-bad.toml",
        match="family 'spiral' in .space. is unknown",
    ),
]

RUN_CASES = [
    case(
        "run-n-trials-0", "study run specs/ok.toml --n-trials 0", match="--n-trials must be at least 1, got 0"
    ),
    case(
        "run-n-trials-neg",
        "study run specs/ok.toml --n-trials -3",
        match="--n-trials must be at least 1, got -3",
    ),
    case(
        "run-n-trials-huge",
        "study run specs/ok.toml --n-trials 1000000000000",
        match="--n-trials is 1,000,000,000,000, above the limit",
    ),
    case(
        "run-workers-huge",
        "study run specs/ok.toml --workers 10000",
        match=r"--workers is 10,000, above the limit of \d+ \(4 worker processes per usable CPU.*EXPLORER_MAX_WORKERS=10000",
    ),
    case("run-workers-0", "study run specs/ok.toml --workers 0", match="--workers must be at least 1"),
    case(
        "run-threads-huge",
        "study run specs/ok.toml --threads 100000",
        match="--threads is 100,000, above the limit",
    ),
    case("run-threads-0", "study run specs/ok.toml --threads 0", match="--threads must be at least 1"),
    case(
        "run-timeout-neg", "study run specs/ok.toml --timeout -1", match="--timeout must be a positive number"
    ),
    case(
        "run-timeout-nan",
        "study run specs/ok.toml --timeout nan",
        match="--timeout must be a positive number",
    ),
    case("run-device", "study run specs/ok.toml --device tpu", 5, match="unknown device 'tpu'"),
    case(
        "run-artifacts-env",
        "study run specs/ok.toml",
        match="EXPLORER_ARTIFACTS: artifact location 'ftp://x' has an unknown scheme",
        env={"EXPLORER_ARTIFACTS": "ftp://x"},
    ),
    case(
        "run-artifacts-opt",
        "study run specs/ok.toml --artifacts ftp://x",
        match="artifact location 'ftp://x' has an unknown scheme",
    ),
    case(
        "run-limit-env",
        "study run specs/ok.toml",
        match="EXPLORER_MAX_D_MODEL='lots' is not a whole number",
        env={"EXPLORER_MAX_D_MODEL": "lots"},
    ),
    case(
        "run-storage-env",
        "study run specs/ok.toml",
        match="Storage URL 'nonsense' is malformed",
        env={"EXPLORER_STORAGE": "nonsense"},
    ),
    case(
        "run-storage-scheme",
        ("study", "run", "specs/ok.toml", "--storage", "sqlte:///x.db"),
        match="is malformed",
    ),
    case(
        "run-storage-mysql",
        ("study", "run", "specs/ok.toml", "--storage", "mysql://me:hunter2@127.0.0.1/x"),
        5,
        match=r"driver for mysql://me:\*\*\*@127.0.0.1/x is not installed \(no module 'MySQLdb'\); pip install PyMySQL",
    ),
    case(
        "run-storage-pg-down",
        ("study", "run", "specs/ok.toml", "--storage", "postgresql://me:hunter2@127.0.0.1:1/x"),
        5,
        match=r"Cannot open the storage postgresql\+psycopg://me:\*\*\*@127.0.0.1:1/x",
    ),
    case(
        "run-storage-other-app",
        ("study", "run", "specs/ok.toml", "--storage", "sqlite:///other.db"),
        match="other.db holds no Optuna storage",
    ),
    case(
        "run-storage-junk",
        ("study", "run", "specs/ok.toml", "--storage", "sqlite:///junk.db"),
        match="junk.db' is not a SQLite database",
    ),
    case(
        "run-storage-in-file",
        ("study", "run", "specs/ok.toml", "--storage", "sqlite:///junk.db/x.db"),
        match="Cannot create the directory",
    ),
    case(
        "run-foreign-study",
        ("study", "run", "specs/ok.toml", "--storage", "sqlite:///plain.db"),
        match="study 'probe' in sqlite:///plain.db was not created by explorer",
    ),
    case(
        "run-foreign-study-2",
        ("study", "run", "specs/plain.toml", "--storage", "sqlite:///plain.db"),
        match="study 'plain' in sqlite:///plain.db was not created by explorer",
    ),
    case(
        "run-changed-spec",
        "study run specs/synth-changed.toml",
        match=r"already exists .* with a different spec: \[space\] heads is \[1, 2, 4, 8, 16, 32\] stored, \[1, 2, 4\] in the file; the stored spec wins",
    ),
    case(
        "run-fewer-trials",
        "study run specs/synth-fewer.toml",
        match=r"n_trials in specs/synth-fewer.toml 3 is below the 30 search trials 'synth' has already finished",
    ),
    case(
        "run-fewer-trials-opt",
        "study run specs/synth-fewer.toml --n-trials 2",
        match="--n-trials 2 is below the 30 search trials",
    ),
    case(
        "run-workers-memory",
        "study run specs/synth-same.toml --workers 8",
        match="in 8 worker.* needs about",
        env={"EXPLORER_MAX_MEMORY_MB": "1000"},
    ),
    case("run-no-flag", "study run specs/ok.toml --frobnicate", 2, match="No such option"),
    case(
        "run-workers-text", "study run specs/ok.toml --workers many", 2, match="'many' is not a valid integer"
    ),
    case(
        "resume-missing",
        "study resume ghost",
        match="no study 'ghost': the database studies/ghost.db does not exist",
    ),
    case(
        "resume-foreign",
        ("study", "resume", "plain", "--storage", "sqlite:///plain.db"),
        match="was not created by explorer .*optuna.load_study",
    ),
    case("resume-n-trials", "study resume synth --n-trials 0", match="--n-trials must be at least 1"),
    case(
        "resume-workers", "study resume synth --workers 10000", match="--workers is 10,000, above the limit"
    ),
    case("resume-bad-name", ("study", "resume", "../x"), match="Study name '../x' is invalid"),
    case(
        "resume-storage-missing",
        ("study", "resume", "synth", "--storage", "sqlite:///nowhere/x.db"),
        match="the database nowhere/x.db does not exist",
    ),
    case("confirm-top", "confirm synth --top 0", match="--top must be at least 1"),
    case(
        "confirm-seeds", "confirm synth --seeds 1000000000", match="--seeds is 1,000,000,000, above the limit"
    ),
    case("confirm-workers", "confirm synth --workers 10000", match="--workers is 10,000"),
    case(
        "confirm-foreign",
        ("confirm", "plain", "--storage", "sqlite:///plain.db"),
        match="was not created by explorer",
    ),
    case("confirm-missing", "confirm ghost", match="no study 'ghost'"),
]

READ_CASES = [
    case(
        "list-nowhere",
        ("study", "list", "--storage", "sqlite:///nowhere/x.db"),
        match=r"no SQLite database at 'nowhere/x.db' .*nothing was created",
    ),
    case("list-junk", ("study", "list", "--storage", "sqlite:///junk.db"), match="is not a SQLite database"),
    case(
        "list-other-app",
        ("study", "list", "--storage", "sqlite:///other.db"),
        match="holds no Optuna storage",
    ),
    case("list-folder", ("study", "list", "--storage", "sqlite:///studies"), match="is not a file"),
    case(
        "list-mysql",
        ("study", "list", "--storage", "mysql://me:hunter2@127.0.0.1/x"),
        5,
        match=r"me:\*\*\*@.*pip install PyMySQL",
    ),
    case(
        "list-pg-down",
        ("study", "list", "--storage", "postgresql://me:hunter2@127.0.0.1:1/x"),
        5,
        match=r"me:\*\*\*@127.0.0.1:1",
    ),
    case(
        "list-env",
        "study list",
        match="Storage URL 'nonsense' is malformed",
        env={"EXPLORER_STORAGE": "nonsense"},
    ),
    case("list-plain", ("study", "list", "--storage", "sqlite:///plain.db"), 0, stdout_empty=False),
    case(
        "list-memory", ("study", "list", "--storage", "sqlite:///:memory:"), match="holds no Optuna storage"
    ),
    case("status-missing", "study status ghost", match="no study 'ghost'"),
    case(
        "status-foreign",
        ("study", "status", "plain", "--storage", "sqlite:///plain.db"),
        match="'plain' in sqlite:///plain.db was not created by explorer",
    ),
    case(
        "status-foreign-json",
        ("study", "status", "plain", "--storage", "sqlite:///plain.db", "--json"),
        match="was not created by explorer",
    ),
    case(
        "status-other-app",
        ("study", "status", "x", "--storage", "sqlite:///other.db"),
        match="holds no Optuna storage",
    ),
    case("status-bad-name", ("study", "status", "a/b"), match="Study name 'a/b' is invalid"),
    case("status-dots", ("study", "status", ".hidden"), match="is invalid"),
    case("status-long-name", ("study", "status", "x" * 5000), match=r"is invalid; use 1-64"),
    case(
        "status-not-in-db",
        ("study", "status", "nobody", "--storage", "sqlite:///studies/synth.db"),
        match="no study 'nobody' in",
    ),
    case(
        "report-foreign",
        ("report", "plain", "--storage", "sqlite:///plain.db"),
        match="was not created by explorer",
    ),
    case("report-missing", "report ghost", match="no study 'ghost'"),
    case("report-out-empty", ("report", "synth", "--out", ""), 2, match="--out.*is empty"),
    case("report-out-file", ("report", "synth", "--out", "plain.db"), match="plain.db"),
    case("report-artifacts", ("report", "synth", "--artifacts", "ftp://x"), match="unknown scheme"),
    case(
        "report-artifacts-env",
        "report synth",
        match="EXPLORER_ARTIFACTS: artifact location 'ftp://x'",
        env={"EXPLORER_ARTIFACTS": "ftp://x"},
    ),
    case(
        "report-other-app",
        ("report", "x", "--storage", "sqlite:///other.db"),
        match="holds no Optuna storage",
    ),
    case(
        "export-superscript",
        ("export", "synth", "--trial", "²", "--out", "x.json"),
        match="--trial '²' is not answer, most-accurate, fastest, a trial number or a finalist run",
    ),
    case(
        "export-superscript-json",
        ("export", "synth", "--trial", "²", "--out", "x.json", "--json"),
        match="--trial '²' is not",
    ),
    case("export-arabic", ("export", "synth", "--trial", "٣", "--out", "x.json"), match="is not answer"),
    case("export-negative", ("export", "synth", "--trial", "-1", "--out", "x.json"), match="is not answer"),
    case(
        "export-no-trial",
        ("export", "synth", "--trial", "99999", "--out", "x.json"),
        match="has no trial synth#99999",
    ),
    case("export-out-empty", ("export", "synth", "--out", ""), 2, match="--out.*is empty"),
    case("export-out-folder", ("export", "synth", "--out", "studies"), match="--out studies is a folder"),
    case("export-out-in-file", ("export", "synth", "--out", "junk.db/x.json"), match="not a writable folder"),
    case(
        "export-foreign",
        ("export", "plain", "--storage", "sqlite:///plain.db", "--out", "x.json"),
        match="was not created by explorer",
    ),
    case(
        "export-threads",
        ("export", "synth", "--out", "x.json", "--threads", "0"),
        match="--threads must be at least 1",
    ),
    case(
        "export-threads-huge",
        ("export", "synth", "--out", "x.json", "--threads", "100000"),
        match="--threads is 100,000",
    ),
    case(
        "export-format",
        ("export", "synth", "--out", "x.json", "--format", "pickle"),
        2,
        match="'pickle' is not one of",
    ),
    case("export-missing", ("export", "ghost", "--out", "x.json"), match="no study 'ghost'"),
    case("compare-one", "compare synth", match="compare needs at least two studies"),
    case("compare-twice", "compare synth synth", match="study 'synth' is named twice"),
    case(
        "compare-foreign",
        ("compare", "synth", "plain", "--storage", "sqlite:///plain.db"),
        match="no study 'synth' in sqlite:///plain.db|was not created by explorer",
    ),
    case("compare-missing", "compare synth ghost", match="no study 'ghost'"),
    case("compare-out-empty", ("compare", "synth", "ghost", "--out", ""), 2, match="is empty"),
    case(
        "heads-foreign",
        ("heads", "plain", "--storage", "sqlite:///plain.db"),
        match="was not created by explorer",
    ),
    case("heads-threads", "heads synth --threads 0", match="--threads must be at least 1"),
    case("heads-threads-huge", "heads synth --threads 100000", match="--threads is 100,000"),
    case("heads-trial", ("heads", "synth", "--trial", "²"), match="--trial '²' is not"),
    case("heads-missing", "heads ghost", match="no study 'ghost'"),
    case("heads-out-empty", ("heads", "synth", "--out", ""), 2, match="is empty"),
]

MODEL_CASES = [
    case(
        "space-huge",
        "space --d-model 1000000000000000",
        match="--d-model is 1,000,000,000,000,000, above the limit of 65,536.*EXPLORER_MAX_D_MODEL",
    ),
    case("space-bigger", "space --d-model 99999999999999999999999999999", match="above the limit of 65,536"),
    case("space-zero", "space --d-model 0", match="d_model must be a positive integer"),
    case("space-negative", "space --d-model -5", match="d_model must be a positive integer"),
    case("space-text", "space --d-model wide", 2, match="'wide' is not a valid integer"),
    case("space-superscript", "space --d-model ²", 2, match="is not a valid integer"),
    case("space-float", "space --d-model 1e3", 2, match="is not a valid integer"),
    case("space-min-dk-0", "space --d-model 64 --min-dk 0", match="min_dk must be a positive integer"),
    case(
        "space-min-dk-huge",
        "space --d-model 64 --min-dk 1000000000000",
        match="no head count gives d_k >= 1000000000000",
    ),
    case("space-min-dk-json", "space --d-model 64 --min-dk 65 --json", match="no head count gives"),
    case("space-head-dim-0", "space --d-model 64 --head-dim 0", match="head_dim 0 is below the d_k floor"),
    case(
        "space-head-dim-huge",
        "space --d-model 64 --head-dim 1000000000",
        match="--head-dim is 1,000,000,000, above the limit",
    ),
    case(
        "space-kv-pairs",
        "space --d-model 65536 --head-dim 1 --kv",
        match="the head counts --d-model / --head-dim allows is 65,536, above the limit of 4,096",
    ),
    case("space-kv-negative", "space --d-model 64 --head-dim -1 --kv", match="head_dim -1 is below"),
    case(
        "train-wide",
        "train --d-model 1000000000",
        match="--d-model is 1,000,000,000, above the limit of 65,536",
    ),
    case("train-deep", "train --layers 1000000", match="--layers is 1,000,000, above the limit of 256"),
    case("train-layers-0", "train --layers 0", match="the number of layers must be at least 1"),
    case("train-epochs-0", "train --epochs 0", match="need epochs >= 1"),
    case("train-epochs-huge", "train --epochs 1000000000", match="--epochs is 1,000,000,000"),
    case("train-batch-0", "train --batch-size 0", match="need epochs >= 1 and batch_size >= 1"),
    case("train-batch-huge", "train --batch-size 1000000000", match="--batch-size is 1,000,000,000"),
    case(
        "train-lr-inf", "train --lr inf", match="the learning rate must be a positive finite number, got inf"
    ),
    case("train-lr-nan", "train --lr nan", match="learning rate must be a positive finite number, got nan"),
    case("train-lr-neg", "train --lr -1", match="learning rate must be"),
    case("train-lr-0", "train --lr 0", match="learning rate must be"),
    case(
        "train-seed-neg",
        "train --seed -1",
        match="the seed must be a whole number from 0 to 2..32 - 1, got -1",
    ),
    case("train-seed-big", "train --seed 99999999999999", match="the seed must be a whole number"),
    case(
        "train-heads-0",
        "train --heads uniform:0",
        match="the number of heads must be at least 1, got 0; choose from",
    ),
    case("train-heads-5", "train --heads uniform:5", match="5 heads is not valid for d_model=64"),
    case("train-heads-order", "train --heads increasing:8-2", match="write 'increasing:2-8'"),
    case("train-heads-shell", ("train", "--heads", "4; rm -rf /"), match="cannot read head schedule"),
    case("train-heads-count", "train --heads 1,2", match="lists 2 head counts but the model has 4 layers"),
    case(
        "train-heads-ramp",
        ("train", "--heads", "increasing:1-100000000", "--head-dim", "8"),
        match="a head count in schedule 'increasing:1-100000000' is 100,000,000, above the limit of 4,096",
    ),
    case(
        "train-heads-huge", "train --heads uniform:99999999999999999999", match="is not valid for d_model=64"
    ),
    case("train-head-dim-0", "train --head-dim 0", match="head_dim 0 is below"),
    case(
        "train-head-dim-huge",
        "train --head-dim 1000000000",
        match="head width .d_k. of the model is 1,000,000,000, above the limit",
    ),
    case("train-head-dim-text", "train --head-dim wide", match="cannot read head_dim"),
    case("train-kv", "train --kv-heads uniform:3", match="3 key/value heads is not valid"),
    case("train-mlp-inf", "train --mlp-ratio inf", match="need mlp_ratio > 0"),
    case("train-mlp-nan", "train --mlp-ratio nan", match="need mlp_ratio > 0"),
    case("train-mlp-neg", "train --mlp-ratio -1", match="need mlp_ratio > 0"),
    case(
        "train-mlp-huge",
        "train --mlp-ratio 1e300",
        match="the MLP width of the model is .*above the limit of 262,144",
    ),
    case("train-threads-0", "train --threads 0", match="--threads must be at least 1"),
    case("train-threads-huge", "train --threads 100000", match="--threads is 100,000, above the limit"),
    case("train-lat-threads", "train --latency-threads 100000", match="--latency-threads is 100,000"),
    case(
        "train-lat-threads-0",
        "train --latency-threads 0",
        match="latency needs batch_size >= 1, threads >= 1",
    ),
    case("train-lat-batch", "train --latency-batch 1000000000", match="--latency-batch is 1,000,000,000"),
    case("train-lat-batch-0", "train --latency-batch 0", match="latency needs batch_size >= 1"),
    case(
        "train-decode-huge",
        "train --task text --decode-context 1000000000",
        match="--decode-context is 1,000,000,000",
    ),
    case(
        "train-decode-digits",
        "train --decode-context 16",
        match="--decode-context needs a language-model task",
    ),
    case(
        "train-memory",
        "train --d-model 16384 --layers 64 --heads uniform:16 --batch-size 4096",
        match=r"the model \(d_model 16384, 64 layers, heads 16, 16 positions\) needs about .* of memory is available here",
    ),
    case("train-task", "train --task nope", match="unknown task 'nope'"),
    case("train-task-missing", "train --task data/missing.npz", match="no such file"),
    case("train-task-rows", "train --task data/rows.npz", match="the arrays of rows.npz needs about .* TB"),
    case(
        "train-task-long",
        "train --task data/long.npz",
        match="the positions per example of X in long.npz is 1,000,000,000, above the limit of 65,536",
    ),
    case("train-task-objects", "train --task data/objects.npz", match="holds Python objects .* refused"),
    case(
        "train-task-float-y",
        "train --task data/floats-y.npz",
        match="y has dtype float64; labels must be integers",
    ),
    case("train-task-text", "train --task data/text.npz", match="is not an .npz archive"),
    case("train-task-extra", "train --task data/extra.npz", match=r"unknown array\(s\) \['Z'\]"),
    case(
        "train-task-ids",
        "train --task data/ids.npz",
        match="token id 1099511627776, but token ids must be below 1,048,576.*EXPLORER_MAX_VOCAB",
    ),
    case("train-task-folder", "train --task data", match="unknown task 'data'"),
    case(
        "train-relations-rows",
        ("train", "--task", "relations", "--task-opt", "n_samples=1000000000000"),
        match="relations option n_samples is 1,000,000,000,000, above the limit",
    ),
    case(
        "train-relations-seq",
        ("train", "--task", "relations", "--task-opt", "seq_len=1000000000"),
        match="relations option seq_len is 1,000,000,000",
    ),
    case(
        "train-relations-vocab",
        ("train", "--task", "relations", "--task-opt", "vocab_size=1000000000000"),
        match="relations option vocab_size is 1,000,000,000,000",
    ),
    case(
        "train-relations-k",
        ("train", "--task", "relations", "--task-opt", "n_relations=99"),
        match="n_relations must be an integer 1..\\d+",
    ),
    case(
        "train-relations-memory",
        ("train", "--task", "relations", "--task-opt", "n_samples=9000000", "--task-opt", "seq_len=60000"),
        match="the relations task needs about",
    ),
    case(
        "train-text-bytes",
        ("train", "--task", "text", "--task-opt", "max_bytes=1000000000000000"),
        match="the text task's max_bytes of .* needs about",
    ),
    case(
        "train-text-pipe",
        ("train", "--task", "text", "--task-opt", "root=data/textroot"),
        match="the text corpus under data/textroot holds too little for the .* split",
    ),
    case(
        "train-text-context",
        ("train", "--task", "text", "--task-opt", "context=1000000"),
        match="text option context must be an integer 2..4096",
    ),
    case("train-task-opt", ("train", "--task-opt", "junk"), match="is not key=value"),
    case("train-task-opt-unknown", ("train", "--task-opt", "colour=red"), match="unknown option.s. colour"),
    case(
        "train-patch", ("train", "--task-opt", "patch=3"), match="digits option patch must be one of 1, 2, 4"
    ),
    case(
        "train-config-zero", "train --config /dev/zero", match="config file '/dev/zero' is not a regular file"
    ),
    case("train-config-missing", "train --config configs/missing.json", match="does not exist"),
    case(
        "train-config-nested",
        "train --config configs/nested.json",
        match="nests too deeply|not readable JSON",
    ),
    case("train-config-garbage", "train --config configs/garbage.json", match="is not readable JSON"),
    case(
        "train-config-huge", "train --config configs/huge.json", match="above the 1.0 MB explorer reads whole"
    ),
    case(
        "train-config-wide",
        "train --config configs/wide.json",
        match="d_model of the model is 1,000,000,000, above the limit",
    ),
    case(
        "train-config-deep",
        "train --config configs/deep.json",
        match="the layers of the model is 100,000, above the limit of 256",
    ),
    case("train-config-inf", "train --config configs/inf.json", match="is missing or has a malformed field"),
    case("train-config-folder", "train --config configs", 2, match="is a directory"),
    case(
        "train-device",
        "train --device tpu",
        match="latency device must be auto, cpu, cuda or cuda:N, got 'tpu'",
    ),
    case("train-runtime", "train --latency-runtime turbo", 2, match="'turbo' is not one of"),
    case(
        "bench-long",
        "bench attention --seq-len 1000000 --batch 10000",
        match=r"the positions \(--seq-len or --context\) is 1,000,000, above the limit of 65,536",
    ),
    case(
        "bench-memory",
        "bench attention --seq-len 60000 --batch 1000",
        match="the attention bench at batch 1000 and 60000 positions needs about .* EXPLORER_MAX_MEMORY_MB",
    ),
    case("bench-heads-0", "bench attention --heads 0", match="--heads must be at least 1, got 0"),
    case("bench-heads-5", "bench attention --heads 5", match="5 heads does not divide d_model=384"),
    case("bench-kv", "bench attention --kv-heads 3", match="3 key/value heads does not divide 8 heads"),
    case("bench-wide", "bench attention --d-model 1000000000", match="--d-model is 1,000,000,000"),
    case("bench-batch-0", "bench attention --batch 0", match="need d_model, seq_len and batch >= 1"),
    case("bench-batch-huge", "bench attention --batch 1000000000", match="--batch is 1,000,000,000"),
    case("bench-threads-0", "bench attention --threads 0", match="--threads must be at least 1"),
    case("bench-threads-huge", "bench attention --threads 100000", match="--threads is 100,000"),
    case(
        "bench-time-inf",
        "bench attention --min-run-time inf",
        match="--min-run-time is inf; give a finite number",
    ),
    case(
        "bench-time-nan",
        "bench attention --min-run-time nan",
        match="--min-run-time must be a positive number",
    ),
    case(
        "bench-time-0", "bench attention --min-run-time 0", match="--min-run-time must be a positive number"
    ),
    case(
        "bench-time-huge",
        "bench attention --min-run-time 1e9",
        match="--min-run-time is 1,000,000,000, above the limit of 3,600",
    ),
    case(
        "bench-context",
        "bench attention --context 10",
        match="--context is the cache length of --decode mode",
    ),
    case(
        "bench-decode-seq", "bench attention --decode --seq-len 10", match="in --decode mode give --context"
    ),
    case(
        "bench-decode-long",
        "bench attention --decode --context 1000000000",
        match="is 1,000,000,000, above the limit",
    ),
    case(
        "bench-decode-runtime",
        "bench attention --decode --runtime compile",
        match="--runtime applies to the forward pass",
    ),
    case("bench-out-empty", ("bench", "attention", "--out", ""), 2, match="is empty"),
    case("bench-out-file", "bench attention --out plain.db", match="plain.db"),
    case(
        "model-missing-pt",
        "bench model models/missing.pt",
        match="no model file models/missing.pt; write one with `explorer export NAME --format state --out models/missing.pt`",
    ),
    case(
        "model-missing-onnx",
        "bench model models/missing.onnx",
        match="--format onnx --out models/missing.onnx",
    ),
    case("model-missing-pt2", "bench model models/missing.pt2", match="--format pt2 --out"),
    case("model-suffix", "bench model models/model.txt", match="cannot tell the format of models/model.txt"),
    case("model-dev-zero", "bench model /dev/zero", match="cannot tell the format"),
    case(
        "model-text",
        "bench model models/text.pt",
        match="is not a plain tensor file .not the torch zip archive",
    ),
    case("model-empty", "bench model models/empty.pt", match="not the torch zip archive"),
    case("model-raw-pickle", "bench model models/raw.pt", match="not the torch zip archive"),
    case("model-evil", "bench model models/evil.pt", match="not the torch zip archive"),
    case("model-folder", "bench model models/folder.pt", 2, match="is a directory"),
    case(
        "model-huge",
        "bench model models/huge-model.pt",
        match="d_model of the model models/huge-model.pt declares is 1,000,000,000, above the limit",
    ),
    case(
        "model-big",
        "bench model models/big-model.pt",
        match=r"the model models/big-model.pt declares .* needs about [\d.,]+ [GT]B, but .* of memory is available",
    ),
    case(
        "model-pt2",
        "bench model models/garbage.pt2",
        match="is not a readable torch.export archive|is not a torch.export archive",
    ),
    case("model-onnx", "bench model models/garbage.onnx", match="onnx|ONNX"),
    case("model-batch-0", "bench model models/text.pt --batch 0", match="--batch must be at least 1, got 0"),
    case(
        "model-threads-0",
        "bench model models/text.pt --threads 0",
        match="--threads must be at least 1, got 0",
    ),
    case(
        "model-batch-huge", "bench model models/text.pt --batch 1000000000", match="--batch is 1,000,000,000"
    ),
    case("model-threads-huge", "bench model models/text.pt --threads 100000", match="--threads is 100,000"),
    case(
        "model-time",
        "bench model models/text.pt --min-run-time inf",
        match="--min-run-time must be a positive number",
    ),
]

CACHE_CASES = [
    case("cache-age-neg", "cache clear --older-than -1", match="--older-than must be a number of days >= 0"),
    case("cache-age-nan", "cache clear --older-than nan", match="--older-than must be a number of days >= 0"),
    case("cache-age-inf", "cache clear --older-than inf", match="--older-than must be a number of days >= 0"),
    case("cache-age-text", "cache clear --older-than soon", 2, match="'soon' is not a valid float"),
    # a user's .tmp-abcdefgh.json and 0*64.json stay
    case("cache-clear-keeps", "cache clear", 0, stdout_empty=False),
    case("cache-list-keeps", "cache list", 0, stdout_empty=False),
    case(
        "cache-max-age", "cache list", match="EXPLORER_CACHE_MAX_AGE", env={"EXPLORER_CACHE_MAX_AGE": "soon"}
    ),
    case("cli-unknown", "frobnicate", 2, match="No such command 'frobnicate'"),
    case("cli-no-args", "study status", 2, match="Missing argument 'NAME'"),
]

PROCESS_CASES = [  # the reported resource blow-ups end to end, in a process of their own
    case("process-train-wide", "train --d-model 1000000000", match="above the limit of 65,536", process=True),
    case(
        "process-bench-long",
        "bench attention --seq-len 1000000 --batch 10000",
        match="above the limit",
        process=True,
    ),
    case("process-spec-dev-zero", "study run /dev/zero", match="not a regular file", process=True),
    case("process-config-dev-zero", "train --config /dev/zero", match="not a regular file", process=True),
    case(
        "process-workers",
        "study run specs/ok.toml --workers 10000",
        match="--workers is 10,000",
        process=True,
    ),
    case("process-npz-rows", "train --task data/rows.npz", match="needs about", process=True),
]


CASES = SPEC_CASES + RUN_CASES + READ_CASES + MODEL_CASES + CACHE_CASES + PROCESS_CASES


def test_the_battery_is_large_and_every_id_once():
    assert len(CASES) >= 150
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_hostile_input_is_one_line_and_changes_nothing(c: Case, world: Path, monkeypatch: pytest.MonkeyPatch):
    before = disk_state(world)
    code, out, err, seconds = run_process(c, world) if c.process else invoke(c, world, monkeypatch)
    check(c, code, out, err, seconds)
    assert disk_state(world) == before, f"{c.id} changed the disk"


# --------------------------------------------------------------------------------------------- read-only


def _read_only_prefix(folder: Path) -> list[str]:
    """The command prefix that runs a command with ``folder`` read-only: a read-only bind mount in a mount
    namespace of its own (root ignores file modes), or nothing for another user (after chmod)."""
    if os.geteuid() != 0:
        for p in [folder, *folder.rglob("*")]:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return []
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'mount --bind -o ro "{folder}" "{folder}" && ! touch "{folder}/.w"'],
        capture_output=True,
    )
    if probe.returncode != 0:
        pytest.skip("no way to make a folder read-only to root here (unshare -rm with a bind mount failed)")
    return [
        "unshare",
        "-rm",
        "sh",
        "-c",
        'mount --bind -o ro "$0" "$0" && shift && exec "$@"',
        str(folder),
        "--",
    ]


READ_ONLY_CASES = [  # (command, exit code, what stdout or the one stderr line says)
    (
        ("study", "status", "synth", "--storage", "sqlite:///ro/synth.db"),
        0,
        "study synth in sqlite:///ro/synth.db",
    ),
    (("study", "list", "--storage", "sqlite:///ro/synth.db"), 0, "synth"),
    (("study", "status", "synth", "--storage", "sqlite:///ro/synth.db", "--json"), 0, '"name": "synth"'),
    (("cache", "clear"), 5, "error: removed 0 cached latencies from .*the folder is read-only to you"),
    (
        ("study", "run", "specs/ok.toml", "--storage", "sqlite:///ro/new.db"),
        5,
        "error: Cannot open the storage sqlite:///ro/new.db",
    ),
    (
        ("export", "synth", "--storage", "sqlite:///ro/synth.db", "--out", "ro/x.json"),
        3,
        "error: cannot write --out ro/x.json",
    ),
]


@pytest.mark.parametrize(
    ("args", "code", "says"), READ_ONLY_CASES, ids=lambda v: "-".join(v[:2]) if isinstance(v, tuple) else None
)
def test_read_only_commands_in_a_read_only_folder(world: Path, args: tuple[str, ...], code: int, says: str):
    """An intact database in a read-only folder is read (opened immutable: no -wal or -shm is needed); what
    would write there is refused in one line; nothing changes."""
    ro = world / "ro"
    if not ro.exists():
        from explorer.measure import LatencyCache
        from tests.fixtures import latency

        ro.mkdir()
        src, dst = sqlite3.connect(world / "studies" / "synth.db"), sqlite3.connect(ro / "synth.db")
        src.backup(dst)  # with what an open connection of an earlier case still holds in its log
        src.close()
        dst.close()
        LatencyCache(ro / "cache").put("an entry", latency(1.0))
    before = disk_state(world)
    env = {k: v for k, v in os.environ.items() if k != "EXPLORER_STORAGE"}
    env |= {"EXPLORER_CACHE_DIR": str(ro / "cache"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [*_read_only_prefix(ro), sys.executable, "-m", "explorer", *args],
        cwd=world,
        env=env,
        capture_output=True,
        text=True,
        timeout=CASE_SECONDS * 3,
    )
    shown = f"exit {proc.returncode}\nstderr:\n{proc.stderr}\nstdout:\n{proc.stdout[:400]}"
    assert proc.returncode == code and "Traceback" not in proc.stderr, shown
    if code == 0:
        assert re.search(says, proc.stdout) and proc.stderr == "", shown
    else:
        assert len(proc.stderr.strip().splitlines()) == 1 and re.search(says, proc.stderr), shown
    assert disk_state(world) == before


# --------------------------------------------------------------------------------------------- foreign studies


@pytest.mark.parametrize(
    "command", ["study status", "report", "study resume", "export --out x.json", "heads"]
)
def test_a_plain_optuna_study_is_refused_at_once_and_left_as_it_was(
    command, storage_url, study_name, tmp_path, monkeypatch
):
    """On SQLite and PostgreSQL alike: no wait for a spec, no table or attribute added, no journal switched."""
    import sqlalchemy

    study = optuna.create_study(study_name=study_name, storage=storage_url)
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    sid = study._storage.get_study_id_from_name(study_name)
    before = (study.user_attrs, study._storage.get_study_system_attrs(sid), [t.params for t in study.trials])
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    result = CliRunner().invoke(
        main,
        [
            *command.split()[: 2 if command.startswith("study") else 1],
            study_name,
            "--storage",
            storage_url,
            *command.split()[2 if command.startswith("study") else 1 :],
        ],
    )
    assert time.perf_counter() - t0 < 10  # not after 30 s of waiting for a spec
    assert result.exit_code == 3, result.stderr
    assert re.fullmatch(r"error: study '.*' in .* was not created by explorer .*\n", result.stderr)
    after = optuna.load_study(study_name=study_name, storage=storage_url)
    assert (
        after.user_attrs,
        after._storage.get_study_system_attrs(sid),
        [t.params for t in after.trials],
    ) == before
    engine = sqlalchemy.create_engine(storage_url)
    assert "explorer_claims" not in sqlalchemy.inspect(engine).get_table_names() or storage_url.startswith(
        "postgres"
    )
    engine.dispose()
    assert list(tmp_path.iterdir()) == ([tmp_path / "studies.db"] if storage_url.startswith("sqlite") else [])


def test_the_trial_names_checked_before_torch_are_the_answers():
    from explorer.answer._pick import PICK_NAMES
    from explorer.cli._common import TRIAL_NAMES

    assert TRIAL_NAMES == PICK_NAMES
