"""The head-count report: report.md, a self-contained report.html, PNG figures and CSVs in one folder.

The content is built once as a list of neutral blocks (headings, paragraphs, tables, figures, code) and rendered
twice, to Markdown and to HTML, so both say the same thing. Every piece of text that reaches the HTML goes
through :func:`html.escape`; figures are embedded as base64 PNG data URIs. Files are written into a temporary
folder next to ``out_dir`` and moved into place at the end, so a crash never leaves half a report.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.insight import analysis as an
from explorer.insight import rules
from explorer.output import plots

__all__ = ["ReportPaths", "write_report"]

Span = str | tuple[str, str]  # plain text, or ("b" | "code", text)


@dataclass(frozen=True)
class ReportPaths:
    """Where the report's files are."""

    out_dir: Path
    markdown: Path
    html: Path
    trials_csv: Path
    pareto_csv: Path
    figures: dict[str, Path] = field(default_factory=dict)


def write_report(study: optuna.Study, out_dir: str | Path, storage_url: str | None = None) -> ReportPaths:
    """Write the report of ``study`` into ``out_dir`` (replacing an earlier report there) and return its paths.

    Raises NoCompletedTrialsError when the study has no COMPLETE trial.
    """
    df = an.trials_table(study)
    if not (df["state"] == "COMPLETE").any():
        raise NoCompletedTrialsError(
            f"study {study.study_name!r} has no completed trial yet; run `explorer study run <spec>` "
            f"(or `explorer study resume {study.study_name}`) first."
        )
    out = Path(out_dir).resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "report.md").exists())):
        raise ConfigError(f"{out} exists and is not a report folder; pass --out with a new or empty folder.")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(
        f".{out.name}.{uuid.uuid4().hex[:8]}.tmp"
    )  # same file system, so the move is a rename
    tmp.mkdir()
    try:
        blocks, figures = _content(study, df, storage_url)
        fig_paths = {}
        for key, make in figures.items():
            fig_paths[key] = plots.save_png(make(), tmp / f"{key}.png")
        df.to_csv(tmp / "trials.csv", index=False)
        an.pareto_front(df).to_csv(tmp / "pareto.csv", index=False)
        (tmp / "report.md").write_text(_markdown(blocks), encoding="utf-8")
        (tmp / "report.html").write_text(_html(blocks, study.study_name, tmp), encoding="utf-8")
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ReportPaths(
        out_dir=out,
        markdown=out / "report.md",
        html=out / "report.html",
        trials_csv=out / "trials.csv",
        pareto_csv=out / "pareto.csv",
        figures={k: out / p.name for k, p in fig_paths.items()},
    )


def _swap(tmp: Path, out: Path) -> None:
    """Move the finished report into place; an earlier report is renamed away first and deleted last."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
        out.rename(old)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# --- content ---------------------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{x * 100:.2f}"


def _num(x: float, fmt: str = ".3g") -> str:
    return "n/a" if pd.isna(x) else format(x, fmt)


def _budgets(spec: Any) -> dict[str, float]:
    found = {
        "max_latency_ms": an.spec_value(spec, "max_latency_ms", "max_latency"),
        "max_params": an.spec_value(spec, "max_params"),
        "min_val_accuracy": an.spec_value(spec, "min_val_accuracy", "min_accuracy"),
    }
    return {k: float(v) for k, v in found.items() if isinstance(v, int | float)}


def _confirmed_knee_blocks(study: optuna.Study, number: int) -> list[tuple]:
    """When `explorer confirm` has retrained this knee, its multi-seed figures, which replace the single run's."""
    from explorer.insight.confirm import confirm_rows, confirm_summary

    rows = [r for r in confirm_rows(study) if r.get("role") == "knee" and r.get("trial") == number]
    if len(rows) < 2:
        return []
    c = confirm_summary(rows).iloc[0]
    return [("p", [("b", f"Confirmed over {int(c['n'])} seeds: "),
                   f"{_pct(c['val_accuracy_mean'])}% validation [95% CI {_pct(c['val_accuracy_ci_low'])}, "
                   f"{_pct(c['val_accuracy_ci_high'])}], {_pct(c['test_accuracy_mean'])}% test, "
                   f"{_num(c['latency_ms_mean'])} ms [{_num(c['latency_ms_ci_low'])}, {_num(c['latency_ms_ci_high'])}]. "
                   "These confirmed figures replace the single-run ones in this sentence and the table below."])]  # fmt: skip


def _relations_blocks(study: optuna.Study, df: pd.DataFrame, storage_url: str | None) -> list[tuple]:
    """ "One head learns one relation", checked on a relations study: accuracy with fewer than k heads in some
    layer vs at least k in every layer (from the trials), and how many relations the heads of the best model
    with at least k heads per layer follow (from its stored weights)."""
    spec = study.user_attrs.get("spec") or {}
    k = int(an.spec_value(spec, "n_relations") or 2)
    ok = an.completed(df)
    blocks: list[tuple] = [("h", 2, f"One head per relation? (relations task, k = {k})")]
    d = rules.compare(ok, ok["heads_min"] >= k, ok["heads_min"] < k) if len(ok) else None
    if d is None:
        acc = (f"Not enough data to compare models with at least {k} heads in every layer against models with "
               f"fewer: each side needs {an.MIN_GROUP} completed trials at the same width and depth.")  # fmt: skip
        held = None
    else:
        held = d.low > 0
        acc = (f"At least {k} heads in every layer: {_pct(d.mean_a)}% validation accuracy ({d.n_a} trials); fewer "
               f"than {k} in some layer: {_pct(d.mean_b)}% ({d.n_b} trials); difference {d.diff * 100:+.2f} points, "
               f"95% CI [{d.low * 100:+.2f}, {d.high * 100:+.2f}] over {d.strata} width/depth groups: "
               + ("fewer than k heads costs accuracy here." if held else "no clear cost of fewer than k heads."))  # fmt: skip
    if len(ok):
        by_heads = ok.sort_values("number").groupby("heads", sort=False)["val_accuracy"]
        order = sorted(by_heads.groups, key=lambda h: [int(x) for x in str(h).split(",")])
        acc += (
            " Each trial's validation accuracy, by heads per layer: "
            + "; ".join(f"{h}: " + ", ".join(f"{_pct(v)}%" for v in by_heads.get_group(h)) for h in order)
            + "."
        )
    blocks.append(("p", [acc]))
    spec_text, followed = _specialization(study, spec, ok, k, storage_url)
    blocks.append(("p", [spec_text]))
    if held is not None and followed is not None:
        covered, n_heads = followed
        specialized = covered >= k and n_heads >= k
        verdict = "held" if held and specialized else "did not hold"
        blocks.append(("p", [("b", f"The claim {verdict} on this study"),
                             f" (accuracy cost below k heads: {'yes' if held else 'no'}; at least k heads specialized: "
                             f"{'yes' if specialized else 'no'}, {n_heads} heads of the best model with k or more per "
                             f"layer follow a relation, covering {covered} of {k})."]))  # fmt: skip
    return blocks


def _specialization(
    study: optuna.Study, spec: dict[str, Any], ok: pd.DataFrame, k: int, storage_url: str | None
) -> tuple[str, tuple[int, int] | None]:
    """Relations followed, and heads following one, in the most accurate trial with >= ``k`` heads per layer.

    That trial, not the knee, is the claim's subject: "at least k heads end up specialized" is about a model
    that has k heads and has learned the task; the knee may have fewer heads. Read from stored weights; a report
    never retrains.
    """
    wide = ok[ok["heads_min"] >= k]
    if wide.empty or storage_url is None:
        return f"No completed trial with at least {k} heads in every layer to analyse.", None
    best = wide.loc[wide["val_accuracy"].idxmax()]
    number = int(best["number"])
    from explorer.insight.heads import (
        SPECIALIZED,
        describe_specialization,
        relation_specialization,
        relations_followed,
        specialized_heads,
    )
    from explorer.search.artifacts import artifact_root_for, store_for, trained_model
    from explorer.search.spec import spec_from_dict
    from explorer.search.study import StudyHandle

    handle = StudyHandle(study, spec_from_dict(spec), storage_url)
    store = store_for(handle)
    if not store.has(study.study_name, number):
        return (f"The trained weights of trial {number} are not stored under {artifact_root_for(storage_url)}; "
                f"`explorer heads {study.study_name} --trial {number}` retrains and analyses it."), None  # fmt: skip
    model, task = trained_model(handle, number, "cpu", store)
    table = specialized_heads(relation_specialization(model, task.val[0], k, task.spec.vocab_size))
    per_layer = describe_specialization(table)
    followed = len(relations_followed(table)), int(table["specialized"].sum())
    return (f"Most accurate trial with at least {k} heads in every layer (trial {number}, heads {best['heads']}, "
            f"{_pct(best['val_accuracy'])}% validation): {per_layer}. A head follows relation r when it puts at "
            f"least {SPECIALIZED:.0%} of its attention between marker r and its target, averaged over the "
            "validation split.", followed)  # fmt: skip


def _confirmation_blocks(study: optuna.Study) -> list[tuple]:
    """The finalists retrained with several seeds (explorer confirm), or a note that they were not yet."""
    from explorer.insight.confirm import confirm_rows, confirm_summary, significant_differences

    rows = confirm_rows(study)
    if not rows:
        return [("p", ["Not yet confirmed: every figure above comes from one training run. "
                       f"`explorer confirm {study.study_name}` retrains the finalists with several seeds, re-times "
                       "them in randomized order, and adds intervals and significance tests here."])]  # fmt: skip
    summary, tests = confirm_summary(rows), significant_differences(rows)
    view = pd.DataFrame({
        "configuration": summary["label"],
        "heads per layer": summary["heads"].astype(str),
        "seeds": summary["n"],
        "val acc (%), mean [95% CI]": [f"{m * 100:.2f} [{lo * 100:.2f}, {hi * 100:.2f}]" for m, lo, hi in
                                       zip(summary["val_accuracy_mean"], summary["val_accuracy_ci_low"],
                                           summary["val_accuracy_ci_high"], strict=True)],
        "latency (ms), mean [95% CI]": [f"{m:.3g} [{lo:.3g}, {hi:.3g}]" for m, lo, hi in
                                        zip(summary["latency_ms_mean"], summary["latency_ms_ci_low"],
                                            summary["latency_ms_ci_high"], strict=True)],
    })  # fmt: skip
    sig = tests[tests["significant"].astype(bool)] if len(tests) else tests
    said = (
        "; ".join(f"{r.label} differs from the knee in {r.metric.replace('_', ' ')} by {r.difference:+.4g} "
                  f"(p = {r.p_value:.3g})" for r in sig.itertuples())
        if len(sig) else "no difference from the knee is significant at the 0.05 level"
    )  # fmt: skip
    return [
        ("h", 3, "Confirmed across seeds"),
        ("p", ["The finalists and the 1-head and 8-head references, retrained with fresh seeds and re-timed in "
               f"randomized order on the same device (Welch t-tests against the knee): {said}. These confirmed "
               "figures supersede the single-run figures above where they differ."]),
        ("table", view),
    ]  # fmt: skip


def _picks_table(rec: an.Recommendation) -> pd.DataFrame:
    rows = []
    for p in (rec.knee, rec.most_accurate, rec.fastest):
        if p is not None:
            rows.append(
                {
                    "pick": p.label,
                    "trial": p.number,
                    "d_model": p.d_model,
                    "layers": p.n_layers,
                    "heads per layer": p.heads,
                    "d_k per layer": p.d_k,
                    "schedule": p.family,
                    "val acc (%)": _pct(p.val_accuracy),
                    "test acc (%)": _pct(p.test_accuracy),
                    "latency (ms, median)": _num(p.latency_ms),
                    "latency IQR (ms)": _num(p.latency_iqr_ms, ".2g"),
                    "params": _num(p.params, ",.0f"),
                }
            )
    return pd.DataFrame(rows)


def _effect_view(eff: pd.DataFrame, level: str, label: str) -> pd.DataFrame:
    def ci(m: str, scale: float, fmt: str) -> pd.Series:
        return eff.apply(
            lambda r: (
                f"{r[f'{m}_mean'] * scale:{fmt}} [{r[f'{m}_ci_low'] * scale:{fmt}}, {r[f'{m}_ci_high'] * scale:{fmt}}]"
                if r["n"] > 1
                else f"{r[f'{m}_mean'] * scale:{fmt}} (one trial)"
            ),
            axis=1,
        )

    view = pd.DataFrame({label: eff[level].astype(str), "trials": eff["n"]})
    if "d_model" in eff:
        view.insert(0, "d_model", eff["d_model"].astype(int))
    view["val acc (%), mean [95% CI]"] = ci("val_accuracy", 100, ".2f")
    view["latency (ms), mean [95% CI]"] = ci("latency_ms", 1, ".3g")
    return view


def _front_view(front: pd.DataFrame, limit: int = 25) -> pd.DataFrame:
    cols = [
        "number",
        "d_model",
        "n_layers",
        "heads",
        "d_k",
        "family",
        "val_accuracy",
        "test_accuracy",
        "latency_ms",
    ]
    view = front[[c for c in cols if c in front]].head(limit).copy()
    for c in ("val_accuracy", "test_accuracy"):
        if c in view:
            view[c] = view[c].map(_pct)
    view["latency_ms"] = view["latency_ms"].map(_num)
    return view.rename(
        columns={"number": "trial", "val_accuracy": "val acc (%)", "test_accuracy": "test acc (%)"}
    )


def _content(
    study: optuna.Study, df: pd.DataFrame, storage_url: str | None
) -> tuple[list[tuple], dict[str, Callable[[], Any]]]:
    """The report as blocks, plus the figures to draw (name -> function returning a Figure)."""
    spec = study.user_attrs.get("spec") or {}
    acct = an.study_account(study, df, storage_url)
    rec = an.recommend(df, _budgets(spec))
    front = an.pareto_front(df)
    feas = an.completed(df)
    knee_row = front[front["number"] == rec.knee.number].iloc[0] if rec.knee is not None else None
    hist = an.hypervolume_history(df)
    imp, imp_reason = an.param_importances(study)
    bench = study.user_attrs.get("bench")
    floors = sorted({float(v) for v in df.get("min_dk", pd.Series(dtype=float)).dropna() if float(v) > 1})
    figures: dict[str, Callable[[], Any]] = {
        "pareto": lambda: plots.pareto_figure(df, front, knee_row),
        "heads": lambda: plots.heads_figure(df),
        "dk": lambda: plots.dk_figure(df, floors),
        "family": lambda: plots.family_figure(df),
        "pareto_heads": lambda: plots.heads_heatmap(front),
        "importance": lambda: plots.importance_figure(imp, imp_reason),
        "hypervolume": lambda: plots.hypervolume_figure(hist),
    }
    if bench:
        figures["bench"] = lambda: plots.bench_figure(bench)

    n_done = acct.states.get("COMPLETE", 0)
    b: list[tuple] = [("h", 1, f"Head-count report: {study.study_name}")]
    b.append(("p", [f"Task {acct.task} on {', '.join(acct.devices) or 'an unrecorded device'}; {n_done} completed "
                    f"trials ({len(feas)} feasible) of {len(df)} recorded. Generated "
                    f"{dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}."]))  # fmt: skip
    if acct.partial:
        b.append(("p", [("b", "Partial study: "), f"{acct.partial_reason}. Everything below uses the trials "
                        "finished so far; resume with ", ("code", acct.resume), "."]))  # fmt: skip

    b.append(("h", 2, "Recommendation"))
    if rec.knee is None:
        b.append(("p", [f"No recommendation: {rec.statement}"]))
    else:
        k = rec.knee
        b.append(("p", [("b", f"Use {k.heads} heads per layer"), f" (d_model {k.d_model}, {k.n_layers} layers, "
                        f"d_k {k.d_k}, {k.family} schedule; trial {k.number}): {_pct(k.val_accuracy)}% validation "
                        f"and {_pct(k.test_accuracy)}% test accuracy at {_num(k.latency_ms)} ms per batch "
                        f"(IQR {_num(k.latency_iqr_ms, '.2g')} ms), {_num(k.params, ',.0f')} parameters. "
                        "This is the knee of the accuracy/latency Pareto front."]))  # fmt: skip
        b.extend(_confirmed_knee_blocks(study, k.number))
        b.append(("table", _picks_table(rec)))
        b.append(("p", [("b", f"Confidence: {rec.confidence}. "), rec.statement]))
    if rec.budgets:
        b.append(
            (
                "p",
                ["Budgets from the spec: " + ", ".join(f"{k} = {v:g}" for k, v in rec.budgets.items()) + "."],
            )
        )
    for note in rec.notes:
        b.append(("p", [note]))
    b.extend(_confirmation_blocks(study))
    b.append(("p", ["The knee is the front point farthest from the straight line joining the most accurate and "
                    "the fastest trial, with both objectives scaled to [0, 1] over the feasible trials (with one "
                    "or two front points, or none off that line, the point nearest the ideal corner). "
                    "Accuracy is chosen on the validation split; test accuracy is reported, never used to choose."]))  # fmt: skip
    b.append(("fig", "pareto", "Accuracy against latency; the black step line is the Pareto front."))
    b.append(("h", 3, f"Pareto front ({len(front)} trials; all in pareto.csv)"))
    b.append(("table", _front_view(front)))

    b.append(("h", 2, "Evidence"))
    b.append(("h", 3, "Head count"))
    b.append(
        ("fig", "heads", "Accuracy and latency against the largest head count in any layer, per d_model.")
    )
    b.append(("table", _effect_view(an.effect_table(df, "heads_max"), "heads_max", "heads (max)")))
    b.append(("h", 3, "Head width d_k and the floor"))
    b.append(("fig", "dk", "Accuracy and latency against the smallest d_k in the model."))
    b.append(("table", _effect_view(an.effect_table(df, "dk_min"), "dk_min", "d_k (min)")))
    b.append(("h", 3, "Schedule family"))
    b.append(("fig", "family", "Uniform, increasing (more heads deep), decreasing and free schedules."))
    b.append(("table", _effect_view(an.effect_table(df, "family"), "family", "schedule")))
    b.append(("h", 3, "Heads per layer on the front"))
    b.append(("fig", "pareto_heads", "Per-layer heads of the Pareto trials."))
    b.append(("h", 3, "What drives each objective"))
    b.append(("fig", "importance", imp_reason or "fANOVA parameter importance per objective."))
    b.append(("h", 3, "Search progress"))
    final = hist["hypervolume"].iloc[-1] if len(hist) else float("nan")
    b.append(
        (
            "fig",
            "hypervolume",
            f"Hypervolume after each completed trial (final {_num(final, '.3f')} of 1.21).",
        )
    )
    if bench:
        b.append(("h", 3, "Attention benchmark"))
        b.append(
            (
                "fig",
                "bench",
                "Serial loop over heads vs merged and fused computation, from the study's bench.",
            )
        )

    b.append(("h", 2, "Rules of thumb, checked on this study"))
    verdicts = rules.rules_of_thumb(df, bench)
    b.append(
        (
            "table",
            pd.DataFrame([{"rule": r.rule, "verdict": r.verdict, "evidence": r.evidence} for r in verdicts]),
        )
    )
    b.append(("p", [f"Method: COMPLETE feasible trials only, compared within groups of equal d_model and depth "
                    f"(the head count does not change the parameter count); a group counts with at least "
                    f"{an.MIN_GROUP} trials on each side; differences are inverse-variance weighted Welch "
                    f"differences with a {an.CONFIDENCE:.0%} t-interval. Supported: the interval excludes no effect "
                    f"in the claimed direction. Contradicted: it lies below +{an.NEGLIGIBLE_ACC * 100:.1f} points "
                    f"(for '8-16 heads suffice': the gain of more than 16 heads exceeds {an.ACC_POINT * 100:.0f} "
                    f"point). Merged heads: at least {an.MIN_SPEEDUP:.2f}x faster than the serial loop and outside "
                    "its spread. Otherwise: not enough data. Each configuration was trained once, so "
                    "seed-to-seed noise is part of the spread."]))  # fmt: skip

    if acct.task == "relations":
        b.extend(_relations_blocks(study, df, storage_url))
    b.append(("h", 2, "Study account"))
    states = ", ".join(f"{s} {n}" for s, n in sorted(acct.states.items()))
    target = f" of {acct.n_trials_target} planned" if acct.n_trials_target else ""
    b.append(("ul", [
        f"Task: {acct.task}; device(s): {', '.join(acct.devices) or 'not recorded'}",
        f"Trials{target}: {states}",
        f"Early-stopped trials: {acct.early_stopped}, saving {acct.epochs_saved} training epochs",
        f"Configurations rejected while sampling: {acct.rejected}",
        f"Wall time: {acct.wall_time_s / 60:.1f} min (first start to last finish); time inside trials: "
        f"{acct.trial_time_s / 60:.1f} min",
        "Status: " + (f"partial ({acct.partial_reason})" if acct.partial else "finished"),
        "Files: trials.csv (every trial, every stored attribute), pareto.csv (the front), *.png (figures)",
    ]))  # fmt: skip
    b.append(("p", ["Reproduce from the spec, or resume this study from its database:"]))
    b.append(("code", f"{acct.reproduce}\n{acct.resume}"))
    return b, figures


# --- rendering -------------------------------------------------------------------------------------------------


def _md_text(s: str) -> str:
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _md_spans(spans: list[Span]) -> str:
    out = []
    for s in spans:
        if isinstance(s, tuple):
            text = _md_text(s[1])
            out.append(f"**{text.strip()}**" + " " * (text != text.rstrip()) if s[0] == "b" else f"`{s[1]}`")
        else:
            out.append(_md_text(s))
    return "".join(out)


def _markdown(blocks: list[tuple]) -> str:
    out = []
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            out.append("#" * blk[1] + " " + _md_text(blk[2]))
        elif kind == "p":
            out.append(_md_spans(blk[1]))
        elif kind == "ul":
            out.append("\n".join(f"- {_md_text(x)}" for x in blk[1]))
        elif kind == "code":
            out.append(f"```\n{blk[1]}\n```")
        elif kind == "fig":
            out.append(f"![{_md_text(blk[2])}]({blk[1]}.png)\n\n*{_md_text(blk[2])}*")
        elif kind == "table":
            out.append(_md_table(blk[1]))
    return "\n\n".join(out) + "\n"


def _md_table(t: pd.DataFrame) -> str:
    if t.empty:
        return "*(no rows)*"
    head = "| " + " | ".join(_md_text(c) for c in t.columns) + " |"
    rule = "|" + "|".join("---" for _ in t.columns) + "|"
    body = [
        "| " + " | ".join(_md_text(v) for v in row) + " |" for row in t.astype(str).itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;line-height:1.45;"
    "color:#222}table{border-collapse:collapse;margin:1em 0;font-size:.85em}td,th{border:1px solid #ccc;"
    "padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f3f3f3}img{max-width:100%;"
    "border:1px solid #eee}figcaption{font-size:.9em;color:#555}pre{background:#f6f6f6;padding:.8em;"
    "overflow-x:auto}code{background:#f6f6f6;padding:0 .2em}"
)


def _html_spans(spans: list[Span]) -> str:
    e = html.escape
    out = []
    for s in spans:
        if isinstance(s, tuple):
            out.append(f"<strong>{e(s[1])}</strong>" if s[0] == "b" else f"<code>{e(s[1])}</code>")
        else:
            out.append(e(str(s)))
    return "".join(out)


def _html(blocks: list[tuple], title: str, fig_dir: Path) -> str:
    e = html.escape
    out = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}</title>"]
    out.append(f"<style>{_CSS}</style></head><body>")
    for blk in blocks:
        kind = blk[0]
        if kind == "h":
            out.append(f"<h{blk[1]}>{e(blk[2])}</h{blk[1]}>")
        elif kind == "p":
            out.append(f"<p>{_html_spans(blk[1])}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in blk[1]) + "</ul>")
        elif kind == "code":
            out.append(f"<pre><code>{e(blk[1])}</code></pre>")
        elif kind == "fig":
            data = base64.b64encode((fig_dir / f"{blk[1]}.png").read_bytes()).decode("ascii")
            out.append(
                f"<figure><img alt='{e(blk[2])}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{e(blk[2])}</figcaption></figure>"
            )
        elif kind == "table":
            t = blk[1]
            head = "".join(f"<th>{e(str(c))}</th>" for c in t.columns)
            rows = "".join(
                "<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in r) + "</tr>"
                for r in t.itertuples(index=False)
            )
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    out.append("</body></html>")
    return "\n".join(out)
