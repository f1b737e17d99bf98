"""Refusals that must leave the disk alone: `explorer report --out` onto a user's folder, and a list of bad
inputs, each checked for one `error:` line, a non-zero exit, no traceback and the working folder unchanged."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._chaos.audit import Outcome, files_of, tree_hash
from benchmarks._chaos.processes import Runner
from benchmarks.synthetic import make_study, write_tiny_spec


def report_onto_user_files(folder: Path, env: dict[str, str]) -> Outcome:
    """`explorer report --out` onto folders holding a user's files: refused, or with --force left alone."""
    out = Outcome("report --out onto a user's folder", "sqlite")
    work = folder / "report-out"
    work.mkdir(parents=True)
    url = f"sqlite:///{work / 's.db'}"
    make_study(15, storage=url, name="syn")
    mine = work / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (work / "thesis.tex").write_text("keep me too")
    r = Runner(work, env)
    files_before = files_of(work)
    checks = [
        (["report", "syn", "--storage", url, "--out", "mine"], False),
        (["report", "syn", "--storage", url, "--out", "."], False),
        (["report", "syn", "--storage", url, "--out", "mine", "--force"], True),
        (["report", "syn", "--storage", url, "--out", "mine"], True),  # now explorer's: rewritten in place
        (["report", "syn", "--storage", url, "--out", "fresh"], True),
        (["report", "syn", "--storage", url, "--out", "fresh"], True),
    ]
    for args, should_pass in checks:
        res = r.run(*args)
        if (res.returncode == 0) != should_pass:
            out.notes.append(
                f"`{' '.join(args[:2] + args[4:])}` exit {res.returncode} (expected "
                f"{'0' if should_pass else 'a refusal'})"
            )
            out.stuck += 1
        out.rounds += 1
    out.deleted = len(files_before - files_of(work))
    kept = (mine / "notes.txt").read_text() == "keep me" and (
        work / "thesis.tex"
    ).read_text() == "keep me too"
    out.notes.append(f"{len(checks)} commands; the user's files intact: {kept}")
    out.deleted += not kept
    out.tracebacks = r.tracebacks()
    return out


def bad_inputs(folder: Path, env: dict[str, str], pg_url: str | None) -> tuple[Outcome, list[dict[str, Any]]]:
    """Each bad input: one `error:` line, a non-zero exit, no traceback, the folder exactly as it was."""
    work = folder / "bad"
    (work / "studies").mkdir(parents=True)
    cache = work / "cache"
    env = {**env, "EXPLORER_CACHE_DIR": str(cache)}
    base = f"sqlite:///{work / 'studies' / 'base.db'}"
    make_study(12, storage=base, name="base")
    spec = write_tiny_spec(work, "fresh", n_trials=2, epochs=1)
    (work / "note.txt").write_text("a user's file")
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("keep me")
    texts = {
        "unknown-key.toml": spec.read_text() + "\n[space2]\nfoo = 1\n",
        "bad-type.toml": spec.read_text().replace("n_trials = 2", 'n_trials = "two"'),
        "no-heads.toml": spec.read_text().replace("heads = [1, 2, 4]", "heads = [3, 5]"),
        "cuda.toml": spec.read_text().replace('device = "cpu"', 'device = "cuda"'),
        "bad-npz.toml": spec.read_text().replace('name = "digits"', 'name = "huge-label.npz"'),
    }
    for fname, text in texts.items():
        (work / fname).write_text(text)
    rng = np.random.default_rng(0)
    X, y = rng.integers(0, 7, size=(60, 5)), np.arange(60) % 3
    np.savez(work / "huge-label.npz", X=X, y=np.r_[y[:-1], 2**40])
    np.savez(work / "huge-token.npz", X=np.where(X == 1, 2**40, X), y=y)
    np.savez(work / "sparse.npz", X=X, y=np.array([0, 1, 5000])[y])
    obj = np.empty((60, 5), dtype=object)
    obj[:] = 1
    np.savez(work / "pickled.npz", X=obj, y=y)
    (work / "text.npz").write_text("not numpy")
    fresh = f"sqlite:///{work / 'new.db'}"
    cases: list[tuple[str, list[str], dict[str, str]]] = [
        ("spec: unknown table", ["study", "run", "unknown-key.toml", "--storage", fresh], {}),
        ("spec: wrong type", ["study", "run", "bad-type.toml", "--storage", fresh], {}),
        ("spec: no valid head count", ["study", "run", "no-heads.toml", "--storage", fresh], {}),
        ("spec: missing file", ["study", "run", "nope.toml", "--storage", fresh], {}),
        ("spec: device cuda without a GPU", ["study", "run", "cuda.toml", "--storage", fresh], {}),
        ("spec: task .npz with a label of 2**40", ["study", "run", "bad-npz.toml", "--storage", fresh], {}),
        ("--workers 0", ["study", "run", str(spec), "--storage", fresh, "--workers", "0"], {}),
        ("--timeout -1", ["study", "run", str(spec), "--storage", fresh, "--timeout", "-1"], {}),
        ("--threads 0", ["study", "run", str(spec), "--storage", fresh, "--threads", "0"], {}),
        ("--device tpu", ["study", "run", str(spec), "--storage", fresh, "--device", "tpu"], {}),
        (
            "EXPLORER_CACHE_MAX_AGE=soon",
            ["study", "run", str(spec), "--storage", fresh],
            {"EXPLORER_CACHE_MAX_AGE": "soon"},
        ),
        (
            "EXPLORER_GRACE_PERIOD=0",
            ["study", "run", str(spec), "--storage", fresh],
            {"EXPLORER_GRACE_PERIOD": "0"},
        ),
        ("--n-trials below done", ["study", "resume", "base", "--storage", base, "--n-trials", "3"], {}),
        ("--n-trials 0", ["study", "resume", "base", "--storage", base, "--n-trials", "0"], {}),
        ("storage: unknown scheme", ["study", "run", str(spec), "--storage", "foo://bar"], {}),
        ("storage: not a URL", ["study", "run", str(spec), "--storage", "just-a-path.db"], {}),
        (
            "storage: unreachable PostgreSQL",
            ["study", "run", str(spec), "--storage", "postgresql+psycopg://me:hunter2@127.0.0.1:1/db"],
            {},
        ),
        ("resume: no such study", ["study", "resume", "ghost", "--storage", base], {}),
        ("resume: no such database", ["study", "resume", "ghost"], {}),
        ("status: bad study name", ["study", "status", "bad name!", "--storage", base], {}),
        ("train: head count breaks the rules", ["train", "--d-model", "64", "--heads", "uniform:5"], {}),
        ("train: npz label 2**40", ["train", "--task", "huge-label.npz", "--epochs", "1"], {}),
        ("train: npz token id 2**40", ["train", "--task", "huge-token.npz", "--epochs", "1"], {}),
        ("train: npz sparse labels {0,1,5000}", ["train", "--task", "sparse.npz", "--epochs", "1"], {}),
        ("train: npz with pickled objects", ["train", "--task", "pickled.npz", "--epochs", "1"], {}),
        ("train: .npz that is text", ["train", "--task", "text.npz", "--epochs", "1"], {}),
        ("train: missing --config", ["train", "--config", "nope.json"], {}),
        ("space: no valid head count", ["space", "--d-model", "8", "--min-dk", "16"], {}),
        ("report --out under a file", ["report", "base", "--storage", base, "--out", "note.txt/r"], {}),
        ("report --out onto a user's folder", ["report", "base", "--storage", base, "--out", "mine"], {}),
        ("heads --out under a file", ["heads", "base", "--storage", base, "--out", "note.txt/h"], {}),
        ("heads --trial 999", ["heads", "base", "--storage", base, "--trial", "999", "--out", "h2"], {}),
        (
            "bench --out under a file",
            [
                "bench",
                "attention",
                "--d-model",
                "32",
                "--heads",
                "2",
                "--seq-len",
                "8",
                "--out",
                "note.txt/b",
            ],
            {},
        ),
        ("export --out under a file", ["export", "base", "--storage", base, "--out", "note.txt/c.json"], {}),
        (
            "export --trial 999",
            ["export", "base", "--storage", base, "--trial", "999", "--out", "c.json"],
            {},
        ),
        ("cache clear --older-than -1", ["cache", "clear", "--older-than", "-1"], {}),
    ]
    if pg_url:
        cases.append(
            (
                "PostgreSQL: no such study",
                ["study", "resume", f"ghost-{uuid.uuid4().hex[:6]}", "--storage", pg_url],
                {},
            )
        )
    r = Runner(work, env)
    rows = []
    out = Outcome("bad inputs", "sqlite" + (" + postgres" if pg_url else ""))
    for label, args, extra_env in cases:
        before = tree_hash(work)
        res = r.run(*args, env=extra_env, timeout=300)
        lines = [x for x in res.stderr.splitlines() if x.strip()]
        errors = [x for x in lines if x.startswith("error:")]
        row = {
            "input": label,
            "exit": res.returncode,
            "error_lines": len(errors),
            "other_lines": len(lines) - len(errors),
            "traceback": "Traceback" in res.stderr,
            "unchanged": tree_hash(work) == before,
            "message": (errors[0] if errors else (lines[-1] if lines else ""))[:150],
            "leaks_password": "hunter2" in res.stderr + res.stdout,
        }
        row["ok"] = (
            res.returncode != 0
            and len(errors) == 1
            and not row["traceback"]
            and row["unchanged"]
            and not row["leaks_password"]
        )
        rows.append(row)
        out.rounds += 1
        out.tracebacks += row["traceback"]
        out.stuck += not row["ok"]
    out.notes.append(f"{sum(r['ok'] for r in rows)} of {len(rows)} inputs refused cleanly (table below)")
    return out, rows
