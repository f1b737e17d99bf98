"""Does Optuna's own dashboard read an explorer study? Start optuna-dashboard on one and ask its HTTP API.

    python -m benchmarks.dashboard_check [--record benchmarks/dashboard_check.md]

In a fresh temporary folder: run a small digits study (with a latency budget, so trials carry constraints),
write its report (which keeps the figures with the study), start ``optuna-dashboard`` on the study's SQLite file
with ``--artifact-dir`` set to the location the study recorded, and check through the dashboard's HTTP API
(``/api/studies``, ``/api/studies/<id>``, ``/artifacts/...``) that

* the objectives are named (``accuracy``, ``latency``), not "Objective 0/1";
* every finished trial shows its head layout and the rest of the architecture as readable user attributes;
* every completed trial lists its weights as an artifact, and the file the dashboard serves loads with
  ``torch.load(weights_only=True)`` into the same tensors explorer stored;
* the report's figures are study artifacts the dashboard serves as PNG.

It also records what the dashboard shows of the trials' constraints. Exits non-zero if a check fails; appends the
results to ``--record``. Needs the ``dashboard`` extra (optuna-dashboard).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.common import EXPLORER, append_record, explorer_env, markdown_table, record_block

SPEC = """\
name = "dash"
n_trials = 4
sampler = "random"
seed = 0

[task]
name = "digits"
epochs = 2
batch_size = 256

[space]
d_model = [32]
n_layers = [2]
heads = [1, 2, 4, 8]
min_dk = [4]
families = ["uniform", "increasing"]
mlp_ratio = [2.0]

[latency]
device = "cpu"
batch_size = 16
threads = 1
min_run_time = 0.1

[budgets]
max_latency_ms = 1000.0

[early_stopping]
enabled = false

[finalists]
enabled = false
"""
READABLE = ("heads", "d_k", "family", "d_model", "n_layers", "val_accuracy", "latency_ms")


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - a server this script started on localhost
        return r.read()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", type=Path, help="append a dated block to this markdown file")
    args = ap.parse_args()
    import optuna
    import optuna_dashboard
    import torch

    from explorer.search.artifacts import ArtifactStore

    work = Path(tempfile.mkdtemp(prefix="explorer-dash-"))
    env = explorer_env(work / "cache")
    (work / "dash.toml").write_text(SPEC)
    for step in (["study", "run", "dash.toml", "--no-bench"], ["report", "dash", "--out", "report"]):
        subprocess.run([*EXPLORER, *step, "--json"], cwd=work, env=env, check=True, capture_output=True)
    url = f"sqlite:///{work / 'studies' / 'dash.db'}"
    study = optuna.load_study(study_name="dash", storage=url)
    location = study.user_attrs["artifacts"]  # recorded by the run: where the weights went
    location = str((work / location).resolve()) if not os.path.isabs(location) else location

    port = free_port()
    dashboard = Path(sys.executable).parent / "optuna-dashboard"
    command = [str(dashboard), url, "--host", "127.0.0.1", "--port", str(port), "--artifact-dir", location]
    server = subprocess.Popen(command, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    checks: list[tuple[str, bool, str]] = []
    try:
        for _ in range(120):
            try:
                get(f"{base}/api/meta")
                break
            except OSError:
                time.sleep(0.5)
        studies = json.loads(get(f"{base}/api/studies"))["study_summaries"]
        sid = next(s["study_id"] for s in studies if s["study_name"] == "dash")
        detail = json.loads(get(f"{base}/api/studies/{sid}"))
        names = detail.get("objective_names")
        checks.append(("objectives named", names == ["accuracy", "latency"], f"objective_names = {names}"))

        complete = [t for t in detail["trials"] if t["state"] == "Complete"]
        first = {a["key"]: a["value"] for a in complete[0]["user_attrs"]}
        readable = all({a["key"] for a in t["user_attrs"]} >= set(READABLE) for t in complete)
        shown = ", ".join(f"{k} = {first[k]}" for k in READABLE)
        checks.append(
            (
                "readable architecture on every complete trial",
                readable,
                f"trial #{complete[0]['number']}: {shown}",
            )
        )
        params = ", ".join(f"{p['name']} = {p['param_external_value']}" for p in complete[0]["params"])
        layouts = ", ".join(
            f"#{t['number']}: {next(a['value'] for a in t['user_attrs'] if a['key'] == 'heads')}"
            for t in complete
        )

        store = ArtifactStore(url)
        served, files = 0, []
        for t in complete:
            arts = [a for a in t["artifacts"] if a["filename"] == f"trial-{t['number']:05d}.pt"]
            if len(arts) != 1:
                continue
            blob = get(f"{base}/artifacts/{sid}/{t['trial_id']}/{arts[0]['artifact_id']}")
            state = torch.load(io.BytesIO(blob), weights_only=True)
            stored = store.load_state("dash", t["number"])
            served += state.keys() == stored.keys() and all(
                torch.equal(state[k], v) for k, v in stored.items()
            )
            files.append(f"#{t['number']} {arts[0]['filename']} ({len(blob):,} bytes)")
        checks.append(
            (
                "weights listed on each complete trial, served, load with weights_only=True, equal explorer's",
                served == len(complete),
                f"{served}/{len(complete)}: " + "; ".join(files),
            )
        )
        pngs = [a for a in detail["artifacts"] if a["filename"].endswith(".png")]
        ok_png = all(get(f"{base}/artifacts/{sid}/{a['artifact_id']}")[:4] == b"\x89PNG" for a in pngs)
        checks.append(
            (
                "report figures are study artifacts served as PNG",
                bool(pngs) and ok_png,
                f"{len(pngs)} figures: {', '.join(sorted(a['filename'] for a in pngs))}",
            )
        )
        constraints_dashboard = {t["number"]: t["constraints"] for t in complete}
        constraints_optuna = {t.number: t.constraints for t in study.trials if t.state.name == "COMPLETE"}
        feasible_attr = {
            t.number: t.user_attrs.get("feasible") for t in study.trials if t.state.name == "COMPLETE"
        }
    finally:
        server.terminate()
        server.wait(timeout=30)

    ok = all(passed for _, passed, _ in checks)
    table = markdown_table(
        ["check through the dashboard's HTTP API", "passed", "what it showed"],
        [[name, "yes" if passed else "NO", shown] for name, passed, shown in checks],
    )
    block = record_block(
        f"optuna-dashboard {optuna_dashboard.__version__} on a 4-trial digits study",
        [
            f"optuna {optuna.__version__}, torch {torch.__version__}; study `sqlite:///.../studies/dash.db`, "
            f"artifacts `{Path(location).name}/` beside it",
            "the dashboard started as `optuna-dashboard URL --host 127.0.0.1 --port PORT --artifact-dir DIR`",
            f"result: {'ALL CHECKS PASSED' if ok else 'SOME CHECKS FAILED'}",
        ],
        [
            table,
            "",
            f"- head layouts as the dashboard lists them (user attribute `heads`): {layouts}",
            f"- Optuna params of the same trial (the sampler's encoding, not meant for reading): {params}",
            f"- constraints: Optuna's reader (`FrozenTrial.constraints`) gives {constraints_optuna}; the "
            f"dashboard's `constraints` field gives {constraints_dashboard} (0.21 reads only the pre-5.0 list "
            f"format); explorer also writes them as the user attributes `constraints` and `feasible` "
            f"({feasible_attr}), which it shows.",
        ],
    )
    print(block)
    append_record(args.record, block)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
