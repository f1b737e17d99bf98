"""A study logged to MLflow: every finished trial as a run, finalist runs grouped under their layout, and the
answer with its report, figures and exported config (the ``tracking`` extra).

Logging happens in the command's own process after each stage (:func:`sync_trials`, called by
:func:`explorer.study._workers.run_stage`) and when the report is written (:func:`log_answer`), never inside a
trial: a tracking server that is down or refuses costs no trial. The first failure ends that sync with one
warning (once per command), and the study records what was not logged (its user attribute ``tracking``); the
next sync logs it. A sync is idempotent: each run carries the tags ``explorer.study`` and ``explorer.trial``, and
only trials without a run are logged.

Each trial's run has the layout as params (``heads`` and ``heads_layer0..``, ``d_k``, ``d_model``,
``n_layers``, ``family``, ``kv_heads``, ``lr``, ``seed``, ``fold``), the validation metric of every epoch (step =
epoch), its latency and parameter count as metrics, and its Optuna state as the tag ``explorer.state`` (a trial
that stopped early is FINISHED in MLflow, tagged PRUNED); its name is the trial as a person reads it
(``trial tiny#3 4,4``, ``trial tiny/finalists#12 4,4 seed 7``). A finalist run is a child (``mlflow.parentRunId``)
of one run per layout, ``finalist 4,4``, which has the layout's params (those its runs share) and its evidence as
metrics. A study without an answer logs no answer run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import logging
import math
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from explorer.answer import Answer, architectures, at_horizon, choose_horizon
from explorer.spec import tracking_uri
from explorer.storage import (
    Retiming,
    Role,
    TrialRecord,
    load_records,
    load_retimings,
    mask_url,
    sqlite_path,
    trial_label,
)
from explorer.study._study import TRACKING_ATTR

_TAG = "explorer."  # explorer's tags on MLflow runs: explorer.study, explorer.trial, explorer.role, ...
_STATUS = {TrialState.COMPLETE: "FINISHED", TrialState.PRUNED: "FINISHED", TrialState.FAIL: "FAILED"}
# a server that does not answer fails a sync in seconds, not after MLflow's default minutes of retries
_QUICK = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
_NO_URLS = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"  # MLflow's own switch for its "View run" lines

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _quick_failures() -> Iterator[None]:
    """MLflow's HTTP retries cut short for the sync (a user's own settings of them are kept), then restored; and
    nothing MLflow writes to stdout reaches it (a tracking server's client prints "View run ... at: URL" for
    every run it ends, which would break a command's ``--json`` document): it goes to the debug log."""
    saved = {k: os.environ.get(k) for k in (*_QUICK, _NO_URLS)}
    for key, value in _QUICK.items():
        os.environ.setdefault(key, value)
    os.environ[_NO_URLS] = "true"
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            yield
    finally:
        for key, previous in saved.items():
            if previous is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = previous
        if printed.getvalue():
            log.debug("MLflow printed: %s", printed.getvalue().strip())


def _client(uri: str) -> Any:
    """An MLflow client for ``uri``, with MLflow's own log lines (table creation...) kept off the user's screen."""
    try:
        from mlflow import MlflowClient
    except ImportError:
        raise RuntimeError("MLflow is not installed: pip install 'explorer[tracking]'") from None
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    return MlflowClient(tracking_uri=uri)


def _experiment(client: Any, name: str, uri: str) -> str:
    """The experiment's id, created when missing (a SQLite store keeps artifacts beside its file, not in ./mlruns)."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    path = sqlite_path(uri) if uri.startswith("sqlite:") else None
    location = None if path is None else (path.resolve().parent / "mlartifacts").as_uri()
    return client.create_experiment(name, artifact_location=location)


def logged_runs(client: Any, experiment_id: str, study: str) -> list[Any]:
    """Every MLflow run explorer logged for ``study`` in the experiment."""
    flt = f"tags.`{_TAG}study` = '{study}'"
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], filter_string=flt, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _ms(when: dt.datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _layout(r: TrialRecord) -> str:
    return ",".join(map(str, r.heads)) if r.heads else "unknown"


def _params(r: TrialRecord) -> dict[str, Any]:
    """The trial's layout and training as MLflow params (strings of at most a few hundred characters)."""
    out: dict[str, Any] = {"heads": _layout(r), "role": r.role, "seed": r.seed, "lr": r.lr, "fold": r.fold}
    if r.purpose is not None:  # a finalist run: its horizon and what it is for (grid, pilot or check)
        out |= {"epochs": r.epochs_planned, "purpose": r.purpose.value}
    if r.config is not None:
        c = r.config
        out |= {f"heads_layer{i}": h for i, h in enumerate(c.heads)}
        out |= {"d_model": c.d_model, "n_layers": len(c.heads), "d_k": ",".join(map(str, c.d_k))}
        out |= {"family": c.family, "mlp_ratio": c.mlp_ratio, "attention": c.attention}
        if c.kv_heads is not None:
            out |= {"kv_heads": ",".join(map(str, c.kv_heads))}
            out |= {f"kv_heads_layer{i}": h for i, h in enumerate(c.kv_heads)}
        if c.head_dim is not None:
            out["head_dim"] = ",".join(map(str, c.head_dim))
    return {k: v for k, v in out.items() if v is not None}


def _metrics(r: TrialRecord) -> list[tuple[str, float, int]]:
    """(key, value, step): the validation metric of every epoch (step = epoch), then the trial's final figures."""
    out = [(r.metric.name, float(v), epoch) for epoch, v in enumerate(r.history, start=1)]
    final = {"latency_ms": r.latency_ms, "params": r.params, "decode_ms": r.decode_ms, "epochs": r.epochs_run}
    final[r.metric.test_name] = r.test_quality
    return out + [(k, float(v), 0) for k, v in final.items() if v is not None]


_RUN_PARAMS = ("role", "seed", "lr", "fold", "epochs", "purpose")  # a run's own, not its layout's


def _layout_params(records: Sequence[TrialRecord]) -> dict[str, dict[str, Any]]:
    """Each finalist layout's params for its parent run: those every one of its runs shares, less what is a
    run's own (seed, fold, horizon), so a user filters the layouts by heads, d_model, d_k..."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.role is not Role.FINALIST:
            continue
        mine = {k: v for k, v in _params(r).items() if k not in _RUN_PARAMS}
        layout = _layout(r)
        held = out.setdefault(layout, mine)
        out[layout] = {k: v for k, v in held.items() if mine.get(k) == v}
    return out


def _log_run(
    client: Any,
    experiment_id: str,
    name: str,
    tags: dict[str, str],
    r: TrialRecord | None,
    params: dict[str, Any] | None = None,
) -> str:
    """Create one finished run with ``tags`` and, for a trial, its params and metrics (else ``params``, a
    layout's); return its id."""
    from mlflow.entities import Metric, Param, RunTag

    start = _ms(r.started) if r is not None else None
    run = client.create_run(experiment_id, start_time=start, tags=tags, run_name=name)
    rid = run.info.run_id
    if r is None and params:
        client.log_batch(rid, params=[Param(k, str(v)) for k, v in params.items()])
    if r is not None:
        stamp = _ms(r.completed) or _ms(r.started) or 0
        metrics = [Metric(k, v, stamp, step) for k, v, step in _metrics(r)]
        own = [Param(k, str(v)) for k, v in _params(r).items()]
        extra = [RunTag("mlflow.note.content", r.fail_reason)] if r.fail_reason else []
        client.log_batch(rid, metrics=metrics, params=own, tags=extra)
        client.set_terminated(rid, status=_STATUS.get(r.state, "FINISHED"), end_time=_ms(r.completed))
    else:
        client.set_terminated(rid, status="FINISHED")
    return rid


def _trial_tags(study: str, r: TrialRecord) -> dict[str, str]:
    tags = {f"{_TAG}study": study, f"{_TAG}trial": str(r.number), f"{_TAG}role": r.role}
    # as a person reads it (a finalist run: its number in the companion study), the name of its run too
    tags[f"{_TAG}optuna_trial"] = trial_label(study, r.number)
    tags |= {f"{_TAG}state": r.state.name, f"{_TAG}layout": _layout(r)}
    if r.label:
        tags[f"{_TAG}label"] = r.label
    return tags


def _sync(
    client: Any,
    experiment_id: str,
    study: str,
    records: Sequence[TrialRecord],
    logged: list[int],
    retimings: Sequence[Retiming] = (),
    grid: Sequence[TrialRecord] | None = None,
) -> set[str]:
    """Log every record without a run yet, appending each trial number to ``logged`` as it is, and each finalist
    layout's evidence on its parent run (raises on the first failure); return the trial numbers MLflow held
    before."""
    from mlflow.entities import Metric

    have = logged_runs(client, experiment_id, study)
    done = {run.data.tags.get(f"{_TAG}trial") for run in have}
    parents = {
        run.data.tags.get(f"{_TAG}layout"): run.info.run_id
        for run in have
        if run.data.tags.get(f"{_TAG}role") == "layout"
    }
    evidence = {run.info.run_id: run.data.metrics.get("runs") for run in have}
    layout_params = _layout_params(records)
    for r in records:
        if str(r.number) in done:
            continue
        tags = _trial_tags(study, r)
        if r.role is Role.FINALIST:
            layout = _layout(r)
            if layout not in parents:
                ptags = {f"{_TAG}study": study, f"{_TAG}role": "layout", f"{_TAG}layout": layout}
                parents[layout] = _log_run(
                    client, experiment_id, f"finalist {layout}", ptags, None, layout_params.get(layout)
                )
            tags["mlflow.parentRunId"] = parents[layout]
            name = f"trial {tags[f'{_TAG}optuna_trial']} {layout} seed {r.seed}" + (
                f" fold {r.fold}" if r.fold is not None else ""
            )
        else:
            name = f"trial {tags[f'{_TAG}optuna_trial']} {_layout(r)}"
        _log_run(client, experiment_id, name, tags, r)
        logged.append(r.number)
    for layout, metrics in _layout_evidence(records if grid is None else grid, retimings).items():
        rid = parents.get(layout)
        if rid is not None and evidence.get(rid) != metrics["runs"]:  # new runs since its evidence was logged
            stamp = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
            step = int(metrics["runs"])
            client.log_batch(rid, metrics=[Metric(k, v, stamp, step) for k, v in metrics.items()])
    return {t for t in done if t is not None}


def _interval_metrics(name: str, interval: Any) -> dict[str, float]:
    """An interval as three metrics: ``name``, ``name_low`` and ``name_high``."""
    return {name: interval.estimate, f"{name}_low": interval.low, f"{name}_high": interval.high}


def _layout_evidence(
    records: Sequence[TrialRecord], retimings: Sequence[Retiming]
) -> dict[str, dict[str, float]]:
    """Each finalist layout's evidence as its parent run's metrics: the mean validation quality over its
    finished runs with its 95% interval, the number of runs, and its latency (median, with the interval a new
    timing falls in; from the re-timings once there are some). A layout string that names two architectures
    (two widths with the same heads) gets none: its parent would mix them."""
    finals = [r for r in records if r.role is Role.FINALIST and r.finished and r.config is not None]
    out: dict[str, dict[str, float]] = {}
    for arch in architectures(finals, Role.FINALIST, retimings=retimings):
        layout = ",".join(map(str, arch.config.heads))
        if layout in out:
            out[layout] = {}
            continue
        metrics = {"runs": float(len(arch.values))}
        metrics |= _interval_metrics(f"{arch.metric.name}_mean", arch.quality)
        metrics |= _interval_metrics("latency_ms", arch.latency)
        out[layout] = {k: float(v) for k, v in metrics.items() if math.isfinite(v)}
    return {layout: metrics for layout, metrics in out.items() if metrics}


def _one_line(exc: BaseException) -> str:
    """The failure in a few words: MLflow's messages run to several hundred characters (a whole HTTP trace)."""
    text = " ".join(str(exc).split())
    if "Max retries exceeded" in text or "Connection refused" in text or "NewConnectionError" in text:
        text = "cannot connect"
    return mask_url(f"{type(exc).__name__}: {text[:160]}")


def sync_trials(
    study: optuna.Study,
    spec: Any,
    *,
    record: bool = True,
    warned: set[str] | None = None,
    also: str = "",
) -> dict[str, Any] | None:
    """Log the study's finished trials that MLflow does not hold yet (None: the study is not tracked). Any
    failure ends the sync: one warning (unless ``warned`` already holds this URI: once per command; ``also``
    names what else goes unlogged), and the result says which trials MLflow holds (``logged``: as found now, or
    as the last sync to this URI found them plus what this one logged before failing) and which it does not.
    With ``record`` it is also stored as the study's ``tracking`` attribute."""
    uri = tracking_uri(spec.tracking)
    if uri is None:
        return None
    experiment = spec.tracking.experiment or spec.name
    finished = [r for r in load_records(study) if r.state in _STATUS]
    before = study.user_attrs.get(TRACKING_ATTR) or {}
    logged: list[int] = []
    error = None
    try:
        with _quick_failures():
            client = _client(uri)
            experiment_id = _experiment(client, experiment, uri)
            grid = at_horizon(finished, choose_horizon(finished, spec))  # the evidence: the grid's runs
            held = _sync(client, experiment_id, spec.name, finished, logged, load_retimings(study), grid)
    except Exception as exc:  # a tracking store that is down, refuses or is not installed: no trial is lost
        error = _one_line(exc)
        held = {str(n) for n in before.get("logged", ())} if before.get("uri") == mask_url(uri) else set()
    held |= {str(n) for n in logged}
    missing = [r.number for r in finished if str(r.number) not in held]
    result = {
        "uri": mask_url(uri),
        "experiment": experiment,
        "logged_now": len(logged),
        "logged": [r.number for r in finished if str(r.number) in held],
        "not_logged": missing,
        # the same trials as a person reads them (NAME#4, NAME/finalists#12), beside explorer's numbers
        "logged_trials": [trial_label(spec.name, r.number) for r in finished if str(r.number) in held],
        "not_logged_trials": [trial_label(spec.name, n) for n in missing],
        "error": error,
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    if error is not None and (warned is None or uri not in warned):
        log.warning(
            "MLflow tracking at %s failed (%s): %d finished trials%s not logged; the study goes on and a later "
            "run or `explorer report` logs them.",
            mask_url(uri),
            error,
            len(missing),
            also,
        )
        if warned is not None:
            warned.add(uri)
    if record:
        study.set_user_attr(TRACKING_ATTR, result)
    return result


def answer_metrics(ans: Answer) -> dict[str, float]:
    """The answer's numbers as its run's metrics: its mean validation quality with the 95% interval, its latency
    with the interval a new timing falls in, the probability that it lies within the margin of the best, and
    whether it is decided (1 or 0). Empty when there is no answer."""
    rec = ans.recommended
    if rec is None:
        return {}
    out = _interval_metrics(rec.metric.name, rec.quality) | _interval_metrics("latency_ms", rec.latency)
    if ans.confidence is not None:
        out["probability"] = ans.confidence
    out["decided"] = float(ans.decided)
    return {k: float(v) for k, v in out.items() if math.isfinite(v)}


def _outage(result: dict[str, Any]) -> tuple[Any, ...]:
    return result.get("uri"), result.get("error"), list(result.get("not_logged") or ())


def log_answer(
    study: optuna.Study,
    spec: Any,
    ans: Answer,
    files: Sequence[Path],
    keep: Callable[[dict[str, Any]], Any] | None = None,
) -> str | None:
    """Log the answer as the run ``answer`` (tag ``explorer.role = answer``, its layout as params and
    :func:`answer_metrics` as metrics) with ``files`` (report.md, figures, the exported config) as artifacts,
    after logging any trial not logged yet; its note is the report's opening. ``keep`` is given the sync's
    result when it differs from the study's ``tracking`` record (none yet, the outage it records is over, or a
    new one began), to store it: the study is open to read. Returns the run id, or None when the study is not tracked
    or MLflow failed (then one warning; nothing else changes), or there is no answer (the trials are logged)."""
    uri = tracking_uri(spec.tracking)
    if uri is None:
        return None
    synced = sync_trials(study, spec, record=False, also=" and the answer")
    before = study.user_attrs.get(TRACKING_ATTR) or {}
    if keep is not None and synced is not None and _outage(before) != _outage(synced):
        keep(synced)
    if synced is not None and synced["error"] is not None:  # said once, answer included
        return None
    if (
        ans.recommended is None
    ):  # nothing to log as the answer: the trials are logged, no empty run beside them
        return None
    heads = ans.recommended.heads
    try:
        with _quick_failures():
            from mlflow.entities import Metric, Param

            client = _client(uri)
            experiment_id = _experiment(client, spec.tracking.experiment or spec.name, uri)
            tags = {f"{_TAG}study": spec.name, f"{_TAG}role": "answer"}
            md = next((p for p in files if p.name == "report.md"), None)
            if md is not None:
                tags["mlflow.note.content"] = md.read_text(encoding="utf-8")[:5000]
            tags[f"{_TAG}layout"] = ",".join(map(str, heads))
            run = client.create_run(experiment_id, tags=tags, run_name="answer")
            rid = run.info.run_id
            stamp = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000)
            client.log_batch(
                rid,
                metrics=[Metric(k, v, stamp, 0) for k, v in answer_metrics(ans).items()],
                params=[Param(f"heads_layer{i}", str(h)) for i, h in enumerate(heads)],
            )
            for path in files:
                client.log_artifact(
                    rid, str(path), artifact_path="figures" if path.suffix == ".png" else None
                )
            client.set_terminated(rid, status="FINISHED")
            return rid
    except Exception as exc:
        log.warning(
            "MLflow tracking at %s failed (%s): the answer was not logged.", mask_url(uri), _one_line(exc)
        )
        return None
