"""Hostile input, slow part: every case of the hostile-input report, through the real command line, one process each, with
its wall time and peak memory measured (tests/test_hostile.py is the fast battery of 250+ inputs in CI).

Each case runs ``python -m explorer ...`` in a sandbox folder holding a real study (made by ``explorer study
run`` on a tiny spec), a plain Optuna study, an exported model and the hostile files, under an address-space
ceiling (RLIMIT_AS, 4 GiB: a blow-up dies instead of taking the machine) and a timeout, at low priority. Per case:
the exit code, the lines on stderr, whether a traceback was printed, whether the sandbox changed (every file's
bytes and every SQLite database's content, hashed before and after), the wall time and the peak resident memory
(``ru_maxrss`` of the process, from wait4). A case holds when it exits 2-5 with one line (or 0 where the case is
a command that should work), no traceback, nothing changed, within 10 s and under 1 GiB (a run that is accepted
and trains may change its study and take its time).

``--root`` runs the cases with another checkout's explorer (``git archive REV | tar -x -C DIR``: the code before a
change); cases marked unsafe there (10,000 worker processes, 100,000 threads) are not run with it.

Usage: python -m benchmarks.hostile [--root DIR] [--label after] [--record benchmarks/hostile.md]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import platform
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import (
    ROOT,
    append_record,
    command,
    load_average,
    load_text,
    machine,
    markdown_table,
    stamp,
)

CEILING = 4 * 2**30  # RLIMIT_AS of every case
TIMEOUT_S = 60.0
HOLD_S, HOLD_BYTES = 10.0, 2**30  # what the acceptance allows a case


@dataclass(frozen=True)
class Case:
    id: str
    what: str  # the report's words
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    ok: bool = False  # a command that should work (exit 0), not be refused
    unsafe_before: bool = False  # would harm a shared machine on code without the limits
    read_only: bool = False  # the sandbox's ro/ folder is mounted read-only for it
    changes: bool = False  # the command may write (a run that is accepted)


def c(id: str, what: str, args: str | tuple[str, ...], **kw) -> Case:
    return Case(id, what, tuple(args.split()) if isinstance(args, str) else args, **kw)


# One case a line, however long.

CASES = [
    c("spec-wide", "d_model = [10**9] in a spec", "study run specs/wide.toml"),
    c("spec-deep", "n_layers = [10**6]", "study run specs/deep.toml"),
    c("spec-free", "a free family over many layers and head counts", "study run specs/free.toml"),
    c("spec-free-kv", "... with kv heads", "study run specs/free-kv.toml"),
    c("workers", "--workers 10000", "study run specs/tiny.toml --workers 10000", unsafe_before=True),
    c("threads", "--threads 100000", "train --threads 100000 --epochs 1", unsafe_before=True),
    c("space-wide", "explorer space --d-model 10**15", "space --d-model 1000000000000000"),
    c("run-dev-zero", "explorer study run /dev/zero", "study run /dev/zero"),
    c("config-dev-zero", "explorer train --config /dev/zero", "train --config /dev/zero"),
    c("train-wide", "explorer train --d-model 1000000000", "train --d-model 1000000000"),
    c(
        "bench-long",
        "bench attention --seq-len 1000000 --batch 10000",
        "bench attention --seq-len 1000000 --batch 10000",
    ),
    c("state-huge", "a state file declaring a huge model", "bench model models/huge.pt"),
    c("npz-rows", "an .npz declaring an 8e12-row array", "train --task data/rows.npz --epochs 1"),
    c("toml-nested", "a TOML spec nested 5,000 arrays deep", "study run specs/nested.toml"),
    c("trial-superscript", "export --trial '²'", ("export", "tiny", "--trial", "²", "--out", "x.json")),
    c(
        "trial-superscript-json",
        "... also with --json",
        ("export", "tiny", "--trial", "²", "--out", "x.json", "--json"),
    ),
    c("model-text", "bench model on a text file named .pt", "bench model models/text.pt"),
    c(
        "cache-read-only",
        "cache clear on a read-only cache",
        "cache clear",
        env={"EXPLORER_CACHE_DIR": "ro/cache"},
        read_only=True,
    ),
    c("n-trials-0", "study run --n-trials 0 on a new study", "study run specs/new.toml --n-trials 0"),
    c("n-trials-neg", "... or -3", "study run specs/new.toml --n-trials -3"),
    c(
        "list-nowhere",
        "study list --storage sqlite:///nowhere/x.db",
        ("study", "list", "--storage", "sqlite:///nowhere/x.db"),
    ),
    c(
        "report-plain",
        "report on a plain Optuna study",
        ("report", "plain", "--storage", "sqlite:///plain.db"),
    ),
    c(
        "resume-plain",
        "study resume on a plain Optuna study",
        ("study", "resume", "plain", "--storage", "sqlite:///plain.db"),
    ),
    c(
        "cache-user-file",
        "cache clear and a user's file named like a temp file",
        "cache clear",
        ok=True,
        changes=True,
    ),
    c(
        "artifacts-ftp",
        "EXPLORER_ARTIFACTS=ftp://x",
        "study run specs/new.toml",
        env={"EXPLORER_ARTIFACTS": "ftp://x"},
    ),
    c("seed-neg", "explorer train --seed -1", "train --seed -1 --epochs 1"),
    c("model-batch-0", "bench model --batch 0", "bench model models/tiny.pt --batch 0"),
    c("model-threads-0", "... and --threads 0", "bench model models/tiny.pt --threads 0"),
    c("lr-inf", "train --lr inf (exit 3, not 4)", "train --lr inf --epochs 1"),
    c("model-pickle", "a pickle payload given to bench model", "bench model models/pickle.pt"),
    c(
        "one-architecture",
        "a one-architecture space with n_trials far above it",
        "study run specs/one.toml",
        ok=True,
        changes=True,
    ),
    c(
        "fewer-trials",
        "lowering n_trials in the spec file of an existing study",
        "study run specs/tiny-fewer.toml",
    ),
    c("changed-spec", "a spec file that differs from the stored study", "study run specs/tiny-changed.toml"),
    c(
        "status-read-only",
        "study status on an intact database in a read-only folder",
        ("study", "status", "tiny", "--storage", "sqlite:///ro/tiny.db"),
        ok=True,
        read_only=True,
    ),
    c("model-missing", "bench model missing.pt (the hint)", "bench model missing.pt"),
    c("heads-0", "--heads 0", "bench attention --heads 0"),
    c("out-empty", "export --out ''", ("export", "tiny", "--out", "")),
    c(
        "mysql",
        "a MySQL URL without its driver",
        ("study", "list", "--storage", "mysql://me:secret@127.0.0.1/x"),
    ),
    c("bom", "a UTF-8 BOM (read as TOML: the spec's own error shows)", "study run specs/bom.toml"),
    c("many-heads", "a heads list of 1..100000", "study run specs/many-heads.toml"),
]


# --------------------------------------------------------------------------------------------- the sandbox


def _spec(name: str, n_trials: int, heads: str = "[1, 2]", extra: str = "") -> str:
    return f"""name = "{name}"
n_trials = {n_trials}
bench = false
{extra}
[task]
name = "digits"
epochs = 1
[space]
d_model = [16]
n_layers = [1]
heads = {heads}
families = ["uniform"]
[latency]
device = "cpu"
batch_size = 4
min_run_time = 0.05
[finalists]
enabled = false
"""


def _npy_header(shape: tuple[int, ...]) -> bytes:
    header = repr({"descr": "<i8", "fortran_order": False, "shape": shape}).encode("latin1")
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def build_sandbox(folder: Path, python: str) -> None:
    """A real study (two trials), its exported model, a plain Optuna study and every hostile file."""
    import optuna
    import torch

    specs = folder / "specs"
    specs.mkdir(parents=True)
    (specs / "tiny.toml").write_text(_spec("tiny", 2))
    (specs / "new.toml").write_text(_spec("new", 2))
    (specs / "tiny-fewer.toml").write_text(_spec("tiny", 1))
    (specs / "tiny-changed.toml").write_text(_spec("tiny", 2, heads="[1, 2, 4]"))
    (specs / "one.toml").write_text(_spec("one", 1_000_000, heads="[2]"))
    (specs / "bom.toml").write_text("\ufeff" + _spec("bom", 0), encoding="utf-8")
    (specs / "many-heads.toml").write_text(_spec("many", 2, heads=str(list(range(1, 100_001)))))
    space = 'd_model = [256]\nn_layers = [{}]\nheads = [1, 2, 4, 8, 16]\nfamilies = ["free"]\n'
    (specs / "free.toml").write_text(
        _spec("free", 2).replace(
            'd_model = [16]\nn_layers = [1]\nheads = [1, 2]\nfamilies = ["uniform"]\n', space.format(16)
        )
    )
    kv = space.format(12) + "kv_heads = [1, 2, 4]\nkv_per_layer = true\n"
    (specs / "free-kv.toml").write_text(
        _spec("freekv", 2).replace(
            'd_model = [16]\nn_layers = [1]\nheads = [1, 2]\nfamilies = ["uniform"]\n', kv
        )
    )
    (specs / "wide.toml").write_text(
        _spec("wide", 2, heads="[1]").replace("d_model = [16]", "d_model = [1000000000]")
    )
    (specs / "deep.toml").write_text(_spec("deep", 2).replace("n_layers = [1]", "n_layers = [1000000]"))
    (specs / "nested.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    env = {**os.environ, "EXPLORER_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": str(ROOT)}
    run = [python, "-m", "explorer"]
    subprocess.run(
        [*run, "study", "run", "specs/tiny.toml"], cwd=folder, env=env, check=True, capture_output=True
    )
    models = folder / "models"
    models.mkdir()
    subprocess.run(
        [*run, "export", "tiny", "--trial", "0", "--format", "state", "--out", "models/tiny.pt"],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
    )
    doc = torch.load(models / "tiny.pt", weights_only=True)
    meta = json.loads(doc["explorer"])
    meta["run_config"]["model"] = {**meta["run_config"]["model"], "d_model": 10**9, "heads": [1]}
    torch.save({**doc, "explorer": json.dumps(meta)}, models / "huge.pt")
    (models / "text.pt").write_text("I am a text file\n")
    (models / "pickle.pt").write_bytes(pickle.dumps({"weights": [1, 2, 3]}, protocol=4))
    data = folder / "data"
    data.mkdir()
    with zipfile.ZipFile(data / "rows.npz", "w") as z:
        z.writestr("X.npy", _npy_header((8 * 10**12, 4)))
        z.writestr("y.npy", _npy_header((8 * 10**12,)))
    plain = optuna.create_study(study_name="plain", storage=f"sqlite:///{folder / 'plain.db'}")
    plain.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    ro = folder / "ro"
    (ro / "cache").mkdir(parents=True)
    shutil.copy(folder / "studies" / "tiny.db", ro / "tiny.db")
    for entry in (folder / "cache").glob("*.json"):
        shutil.copy(entry, ro / "cache" / entry.name)
    (folder / "cache" / ".tmp-abcdefgh.json").write_text("a user's notes\n")
    old = time.time() - 7 * 86400
    os.utime(folder / "cache" / ".tmp-abcdefgh.json", (old, old))


def disk_state(folder: Path) -> dict[str, str]:
    """Every file's sha256; a SQLite database by its logical content too (its -wal and -shm passed over)."""
    state = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.name.endswith(("-wal", "-shm")):
            continue
        data = p.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if data[:16] == b"SQLite format 3\x00":
            mode = "mode=ro" if Path(f"{p}-wal").exists() else "immutable=1"
            con = sqlite3.connect(f"file:{p}?{mode}", uri=True)
            digest += hashlib.sha256("\n".join(con.iterdump()).encode()).hexdigest()
            con.close()
        state[str(p.relative_to(folder))] = digest
    return state


# --------------------------------------------------------------------------------------------- running


def run_case(case: Case, folder: Path, python: str, root: Path = ROOT) -> dict:
    """The case in its own process (explorer from ``root``): exit code, stderr, seconds and peak RSS (wait4),
    under RLIMIT_AS."""
    env = {k: v for k, v in os.environ.items() if k != "EXPLORER_STORAGE"}
    env |= {
        "EXPLORER_CACHE_DIR": str(folder / "cache"),
        "PYTHONPATH": str(root),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env |= case.env
    prefix = []
    if case.read_only:
        prefix = [
            "unshare",
            "-rm",
            "sh",
            "-c",
            'mount --bind -o ro "$0" "$0" && shift && exec "$@"',
            str(folder / "ro"),
            "--",
        ]
    before = disk_state(folder)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (CEILING, CEILING))
            os.nice(10)

        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*prefix, python, "-m", "explorer", *case.args],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=err,
            preexec_fn=limits,
            start_new_session=True,
        )
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > TIMEOUT_S:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.05)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    changed = disk_state(folder) != before
    code = proc.returncode
    result = {
        "id": case.id,
        "what": case.what,
        "command": "explorer " + " ".join(_shell(a) for a in case.args),
        "env": " ".join(f"{k}={v}" for k, v in case.env.items()),
        "exit": "timeout" if timed_out else code,
        "lines": len(lines),
        "traceback": "Traceback" in stderr,
        "changed": changed,
        "seconds": seconds,
        "peak_mb": usage.ru_maxrss / 1024,
        "line": (lines[-1] if lines else "")[:400],
    }
    errors_ok = isinstance(code, int) and 2 <= code <= 5 and len(lines) == 1
    works_ok = code == 0 and (not lines or case.changes)
    result["holds"] = bool(
        not timed_out
        and (works_ok if case.ok else errors_ok)
        and not result["traceback"]
        and (not changed or case.changes)
        and (seconds <= HOLD_S or case.changes)  # an accepted run trains: its time is its own
        and usage.ru_maxrss * 1024 < HOLD_BYTES
    )
    if case.id == "one-architecture":  # the stop must name the real cause
        result["holds"] = result["holds"] and "no architecture left" in stderr
    if case.id == "cache-user-file":  # the cache's own entries go, the user's file stays
        result["holds"] = result["holds"] and (folder / "cache" / ".tmp-abcdefgh.json").exists()
    return result


def _shell(arg: str) -> str:
    return arg if arg and all(ch.isalnum() or ch in "-_./:=" for ch in arg) else repr(arg)


def render(results: list[dict], label: str) -> str:
    held = sum(bool(r.get("holds")) for r in results)
    head = (
        f"### {label}: {held} of {len(results)} cases hold\n\n"
        f"`{command()}` on {machine()} ({platform.platform()}), {stamp()}, load {load_text(load_average())}; "
        f"each case one process at nice 10 under RLIMIT_AS {CEILING // 2**30} GiB.\n\n"
    )
    rows = []
    for r in results:
        if r.get("skipped"):
            rows.append([r["id"], r["what"], f"not run: {r['skipped']}", "", "", "", "", "", "", ""])
            continue
        rows.append(
            [
                r["id"],
                r["what"],
                r["exit"],
                r["lines"],
                "yes" if r["traceback"] else "no",
                "yes" if r["changed"] else "no",
                f"{r['seconds']:.1f}",
                f"{r['peak_mb']:.0f}",
                "yes" if r["holds"] else "**no**",
                r["line"],
            ]
        )
    header = [
        "case",
        "the report's words",
        "exit",
        "stderr lines",
        "traceback",
        "disk changed",
        "s",
        "peak MB",
        "holds",
        "last line",
    ]
    return head + markdown_table(header, rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs the cases")
    ap.add_argument(
        "--root", type=Path, default=ROOT, help="the checkout whose explorer runs them (PYTHONPATH)"
    )
    ap.add_argument("--label", default="after")
    ap.add_argument("--record", type=Path, help="append the table to this markdown file")
    ap.add_argument("--only", nargs="*", help="case ids to run")
    # (the sandbox, built in a process of its own)
    ap.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        build_sandbox(args.build, sys.executable)
        return
    before_code = args.root.resolve() != ROOT or Path(args.python).resolve() != Path(sys.executable).resolve()
    with tempfile.TemporaryDirectory(prefix="explorer-hostile-") as tmp:
        folder = Path(tmp)
        # fixtures by this checkout, so both runs see the same files; in a child, so that this process stays small
        # (a case's peak memory counts what its process inherited before exec)
        subprocess.run(
            [sys.executable, "-m", "benchmarks.hostile", "--build", str(folder)],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        results = []
        for case in CASES:
            if args.only and case.id not in args.only:
                continue
            if before_code and case.unsafe_before:
                results.append(
                    {
                        "id": case.id,
                        "what": case.what,
                        "skipped": "would start that many processes or threads",
                    }
                )
                continue
            results.append(run_case(case, folder, args.python, args.root))
            r = results[-1]
            print(
                f"{r['id']:<24} exit {r['exit']!s:<7} {r['seconds']:5.1f} s {r['peak_mb']:6.0f} MB "
                f"{'holds' if r['holds'] else 'DOES NOT HOLD'}: {r['line'][:120]}",
                flush=True,
            )
    table = render(results, args.label)
    append_record(args.record, table)
    print(table)


if __name__ == "__main__":
    main()
