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
* the report's figures are study artifacts the dashboard serves as PNG;
* every completed search trial's Optuna params name its head count per layer (``heads_layer0 = 4``), equal to
  its layout, beside the sampler's positions;
* ``optuna.visualization.plot_param_importances`` on the quickstart study's search (``studies/quickstart.toml``
  run with ``--no-finalists``) names each layer's head count.

* the study's front (``best_trials``) holds searched architectures only, and no finalist run is a trial of the
  study: the study runs a small finalist stage, whose runs (and re-timings) are the companion study
  ``dash/finalists``, which the dashboard lists labelled (``finalists_of``, ``about``) with the answer the
  report keeps.

It also records what the dashboard shows of the trials' constraints. Exits non-zero if a check fails; appends the results to ``--record``. Needs the ``dashboard`` extra (optuna-dashboard, plotly).
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
enabled = true
top = 1
references = false
ladder = false
folds = 1
seeds = 1
epochs = 2
timing_rounds = 1
"""
QUICKSTART = Path(__file__).resolve().parents[1] / "studies" / "quickstart.toml"
READABLE = ("heads", "d_k", "family", "d_model", "n_layers", "val_accuracy", "latency_ms")


def _attr(trial: dict, key: str) -> object:
    """A user attribute of a trial as the dashboard's API gives it: a string, lists as JSON (None when absent)."""
    return next((a["value"] for a in trial["user_attrs"] if a["key"] == key), None)


def _heads_params(trial: dict) -> list[int]:
    """The trial's ``heads_layer0 ..`` Optuna params as the dashboard's API gives them, in layer order."""
    values = {
        p["name"]: p["param_external_value"] for p in trial["params"] if p["name"].startswith("heads_layer")
    }
    return [int(values[f"heads_layer{i}"]) for i in range(len(values))]


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
    from optuna.trial import TrialState

    from explorer.storage import FINALIST_BASE
    from explorer.study import ArtifactStore

    work = Path(tempfile.mkdtemp(prefix="explorer-dash-"))
    env = explorer_env(work / "cache")
    (work / "dash.toml").write_text(SPEC)
    (work / "quickstart.toml").write_text(QUICKSTART.read_text())
    for step in (
        ["study", "run", "dash.toml", "--no-bench"],
        ["report", "dash", "--out", "report"],
        ["study", "run", "quickstart.toml", "--no-bench", "--no-finalists"],
    ):
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

        roles = {t["number"]: _attr(t, "role") for t in detail["trials"]}
        complete = [
            t for t in detail["trials"] if t["state"] == "Complete" and roles[t["number"]] == "search"
        ]
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
        per_layer = {t["number"]: _heads_params(t) for t in complete}
        named = all(per_layer[t["number"]] == json.loads(str(_attr(t, "heads"))) for t in complete)
        checks.append(
            (
                "head count per layer as Optuna params on every completed search trial",
                named and bool(complete),
                "; ".join(
                    f"#{n}: " + ", ".join(f"heads_layer{i} = {h}" for i, h in enumerate(hs))
                    for n, hs in per_layer.items()
                ),
            )
        )
        front = [f"#{t['number']} ({roles[t['number']]})" for t in detail["best_trials"]]
        in_study = sorted(set(roles.values()) - {None})
        checks.append(
            (
                "the study's front (best_trials) holds searched architectures only; no finalist run in the study",
                bool(detail["best_trials"])
                and all(roles[t["number"]] == "search" for t in detail["best_trials"])
                and in_study == ["search"],
                f"front {', '.join(front)}; roles of the study's trials: {in_study}",
            )
        )
        companion = next((s for s in studies if s["study_name"] == "dash/finalists"), None)
        cdetail = {} if companion is None else json.loads(get(f"{base}/api/studies/{companion['study_id']}"))
        cattrs = {a["key"]: a["value"] for a in cdetail.get("user_attrs", [])}
        croles = {_attr(t, "role") for t in cdetail.get("trials", [])}
        finals = [t for t in cdetail.get("trials", []) if t["state"] == "Complete"]
        # the dashboard cuts an attribute's JSON at 1,024 characters: the whole values are read through Optuna
        kept = optuna.load_study(study_name="dash/finalists", storage=url).user_attrs if companion else {}
        answer = kept.get("answer") or {}
        shown_on_dash = next((a["value"] for a in detail.get("user_attrs", []) if a["key"] == "answer"), None)
        checks.append(
            (
                "the finalist runs in the companion study dash/finalists, labelled, with the answer",
                cattrs.get("finalists_of") == "dash"
                and bool(cattrs.get("about"))
                and croles == {"finalist"}
                and bool(finals)
                and bool(kept.get("retimed"))
                and answer.get("heads") is not None
                and cattrs.get("answer") == shown_on_dash,
                f"{len(finals)} complete finalist runs (roles {sorted(croles)}), objective_names = "
                f"{cdetail.get('objective_names')}; user attrs finalists_of = {cattrs.get('finalists_of')!r}, "
                f"retimed ({len(kept.get('retimed') or [])} timings), answer heads = {answer.get('heads')} (the "
                f"same attribute as on dash); about = {cattrs.get('about')!r}",
            )
        )

        layouts = ", ".join(f"#{t['number']}: {_attr(t, 'heads')}" for t in complete)

        store = ArtifactStore(url)
        served, files = 0, []
        # the search trials' weights, and the finalist runs' on the companion's trials (trial BASE + n to explorer)
        owned = [(t, sid, t["number"]) for t in complete]
        owned += [(t, companion["study_id"], FINALIST_BASE + t["number"]) for t in finals]
        for t, owner, number in owned:
            arts = [a for a in t["artifacts"] if a["filename"] == f"trial-{t['number']:05d}.pt"]
            if len(arts) != 1:
                continue
            blob = get(f"{base}/artifacts/{owner}/{t['trial_id']}/{arts[0]['artifact_id']}")
            state = torch.load(io.BytesIO(blob), weights_only=True)
            stored = store.load_state("dash", number)
            served += state.keys() == stored.keys() and all(
                torch.equal(state[k], v) for k, v in stored.items()
            )
            files.append(f"#{t['number']} {arts[0]['filename']} ({len(blob):,} bytes)")
        checks.append(
            (
                "weights listed on each complete trial and finalist run, served, load with weights_only=True, "
                "equal explorer's",
                served == len(owned),
                f"{served}/{len(owned)} (search trials, then finalist runs of dash/finalists): "
                + "; ".join(files),
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
        constraints_optuna = {t.number: t.constraints for t in study.trials if t.state is TrialState.COMPLETE}
        feasible_attr = {
            t.number: t.user_attrs.get("feasible") for t in study.trials if t.state is TrialState.COMPLETE
        }
    finally:
        server.terminate()
        server.wait(timeout=30)
    quick = optuna.load_study(
        study_name="quickstart", storage=f"sqlite:///{work / 'studies' / 'quickstart.db'}"
    )
    shown = {}
    for which, names in (
        ("every param", None),
        ("the readable ones", ["family", "heads_layer0", "heads_layer1"]),
    ):
        # fANOVA (seeded): a variance decomposition, the same whichever way the accuracy is read
        fig = optuna.visualization.plot_param_importances(
            quick,
            evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0),
            params=names,
            target=lambda t: t.values[0],
            target_name="accuracy",
        )
        bars = fig.data[0]
        shown[which] = ", ".join(
            f"{y} {float(x):.2f}" for x, y in sorted(zip(bars.x, bars.y, strict=True), reverse=True)
        )
    searched = sum(t.state is TrialState.COMPLETE for t in quick.trials)
    checks.append(
        (
            "plot_param_importances on the quickstart study names each layer's head count",
            all(f"heads_layer{i}" in shown["every param"] for i in range(2)),
            f"{searched} completed search trials; accuracy importance (fANOVA, seed 0) over every param: "
            f"{shown['every param']}",
        )
    )

    ok = all(passed for _, passed, _ in checks)
    table = markdown_table(
        ["check through the dashboard's HTTP API", "passed", "what it showed"],
        [[name, "yes" if passed else "NO", shown] for name, passed, shown in checks],
    )
    block = record_block(
        f"optuna-dashboard {optuna_dashboard.__version__} on a 4-trial digits study, and the quickstart's search",
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
            f"- Optuna params of trial #{complete[0]['number']} (the sampler's positions, then the readable values): "
            f"{params}",
            f"- the quickstart's importances (fANOVA, seed 0) over the readable params alone "
            f"(`plot_param_importances(study, params=['family', 'heads_layer0', 'heads_layer1'], ...)`): "
            f"{shown['the readable ones']}",
            f"- the front the dashboard draws for `dash` (`best_trials`): {', '.join(front)}; the {len(finals)} "
            "finalist runs are trials of the companion study `dash/finalists`, listed beside it.",
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
