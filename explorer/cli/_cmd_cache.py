"""`explorer cache list` and `explorer cache clear`: the latency cache."""

from __future__ import annotations

import math
from typing import Any

import click

from explorer.cli._common import emit_json, json_option
from explorer.errors import ConfigError


@click.group()
def cache() -> None:
    """The latency cache ($EXPLORER_CACHE_DIR, default ~/.cache/explorer/latency): list or clear it."""


@cache.command("list")
@json_option
def cache_list(as_json: bool) -> None:
    """Every cached latency with its age, spread, load when measured, and whether it would be reused."""
    from explorer.measure import LatencyCache, describe_age

    store = LatencyCache()
    now = store.machine()
    rows: list[dict[str, Any]] = []  # one JSON object per entry
    for e in store.entries():
        r, age = e.result, e.age_s()
        rows.append(
            {
                "key": e.key,
                "median_ms": r.median_ms,
                "iqr_ms": r.iqr_ms,
                "spread": r.iqr_ms / r.median_ms if r.median_ms > 0 else None,
                "measured_at": r.measured_at,
                "age_s": age,
                "load": r.load,
                "machine": None if e.machine is None else e.machine.to_dict(),
                "reuse": not (why := store.problem(e, now)),
                "remeasure_because": why or None,
                "file": str(e.path),
            }
        )
    if as_json:
        emit_json(
            {
                "directory": str(store.directory),
                "max_age_days": store.policy.max_age_s / 86400,
                "machine_now": now.to_dict(),
                "entries": rows,
            }
        )
        return
    if not rows:
        click.echo(f"no cached latencies in {store.directory}")
        return
    click.echo(f"{len(rows)} cached latencies in {store.directory}")
    click.echo(f"{'age':>10}  {'median ms':>10}  {'spread':>6}  {'load':>5}  {'reuse':<5}  key")
    for row in rows:
        spread = "-" if row["spread"] is None else f"{row['spread']:.0%}"
        load = "-" if row["load"] is None else f"{row['load']:.2f}"
        click.echo(
            f"{describe_age(row['age_s']):>10}  {row['median_ms']:>10.3f}  {spread:>6}  {load:>5}  "
            f"{'yes' if row['reuse'] else 'no':<5}  {row['key']}"
        )
        if row["remeasure_because"]:
            click.echo(f"{'':>10}  measured again when next asked: {row['remeasure_because']}")


@cache.command("clear")
@click.option(
    "--older-than", "older_than", type=float, metavar="DAYS", help="Remove only entries older than this."
)
@json_option
def cache_clear(older_than: float | None, as_json: bool) -> None:
    """Remove cached latencies (all, or those older than --older-than DAYS); nothing else is touched."""
    if older_than is not None and not (math.isfinite(older_than) and older_than >= 0):
        raise ConfigError(f"--older-than must be a number of days >= 0, got {older_than:g}.")
    from explorer.measure import CachePolicy, LatencyCache

    store = LatencyCache(policy=CachePolicy())  # clearing works even when EXPLORER_CACHE_MAX_AGE is malformed
    removed = store.clear(None if older_than is None else older_than * 86400)
    if as_json:
        emit_json({"directory": str(store.directory), "removed": [str(p) for p in removed]})
        return
    which = "" if older_than is None else f" older than {older_than:g} days"
    click.echo(f"removed {len(removed)} cached latencies{which} from {store.directory}")
