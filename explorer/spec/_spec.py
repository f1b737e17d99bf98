"""Study specs: a strict TOML format describing one study, parsed into frozen dataclasses.

A spec is checked completely before anything runs: an unknown key at any level, a wrong type, a missing
required key, or a space that is empty or impossible under the head rules is a :class:`SpecError` naming the
key, its table and the fix. :meth:`StudySpec.to_dict` is JSON-ready and canonical (sorted lists, defaults filled
in); it is stored in the study's user attrs so ``explorer study resume NAME`` works from the database alone,
and ``spec_from_dict(spec.to_dict()) == spec``.

Every key, its table, type, default, limits and documentation is declared once, as a field of :class:`StudySpec`
or of its tables' dataclasses (:func:`explorer.fields.key`); each table is read by the one generic reader
(:func:`explorer.spec._toml.read_table`) and then held to the rules between its keys, here and in the
table's own module.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from explorer.errors import ConfigError, ExplorerError, SpecError
from explorer.layout import (
    DEVICE_CHOICES,
    LATENCY_DTYPES,
    LATENCY_RUNTIMES,
    SCHEDULE_FAMILIES,
    LatencyConfig,
    SpaceSpec,
    check_space,
    realisable_families,
)
from explorer.limits import check_file_size
from explorer.spec._evidence_spec import read_answer, read_finalists
from explorer.spec._fidelity import EarlyStoppingSpec
from explorer.spec._goals import (
    ModelSpec,
    read_budgets,
    read_decode,
    read_model,
    read_objectives,
    read_task,
)
from explorer.spec._hf_check import check_hf, space_defaults
from explorer.spec._overrides import apply_overrides, key_sources, parse_override
from explorer.spec._pretrained_check import check_pretrained, pretrained_defaults
from explorer.spec._size_checks import check_layouts, check_raw
from explorer.spec._study_spec import StudySpec
from explorer.spec._toml import Table, is_list, is_number, read_table, table_keys
from explorer.spec._tracking_spec import read_tracking
from explorer.storage import check_artifact_location, check_study_name, mask_url

# --------------------------------------------------------------------------------------------- reading


def _space(data: Any) -> SpaceSpec:
    t = Table(data, "[space]", table_keys(SpaceSpec))
    names = f"a non-empty list of names from {', '.join(SCHEDULE_FAMILIES)}"
    families = t.get(
        "families", SpaceSpec.families, lambda v: is_list(v, lambda x: isinstance(x, str)), names
    )
    for f in families:
        if f not in SCHEDULE_FAMILIES:
            raise SpecError(
                f"family {f!r} in [space] is unknown; choose from {', '.join(SCHEDULE_FAMILIES)}."
            )
    t.distinct("families", list(families))
    lr = t.raw("lr", SpaceSpec.lr)
    if isinstance(lr, list):
        if len(lr) != 2 or not is_list(lr, is_number):
            raise t.fail("lr", "a number or a [low, high] pair of numbers", lr)
        if not 0 < lr[0] < lr[1]:
            raise SpecError(
                f"'lr' in [space] is {lr!r}; a searched range needs 0 < low < high, e.g. [1e-4, 1e-2]."
            )
        lr = (float(lr[0]), float(lr[1]))
    else:
        lr = t.positive("lr", SpaceSpec.lr)
    families = tuple(f for f in SCHEDULE_FAMILIES if f in families)
    space = read_table(SpaceSpec, data, "[space]", families=families, lr=lr)
    if "families" not in data:  # default: every family this space can realise (free needs 3+ layers...)
        space = dataclasses.replace(space, families=realisable_families(space) or SCHEDULE_FAMILIES)
    return space


def _latency(data: Any) -> LatencyConfig:
    t = Table(data, "[latency]", table_keys(LatencyConfig))
    device = t.text("device", LatencyConfig.device, choices=DEVICE_CHOICES)
    dtype = t.text("dtype", LatencyConfig.dtype, choices=LATENCY_DTYPES)
    runtime = t.text("runtime", LatencyConfig.runtime, choices=LATENCY_RUNTIMES)
    if device == "cpu" and dtype != "float32":
        raise SpecError(
            f'[latency] times {dtype} on the cpu; half types need device = "cuda" (or use float32).'
        )
    if runtime == "onnxruntime" and dtype != "float32":
        raise SpecError('[latency] runtime = "onnxruntime" times float32 models; set dtype = "float32".')
    try:
        return read_table(LatencyConfig, data, "[latency]", device=device, dtype=dtype, runtime=runtime)
    except ConfigError as exc:
        raise SpecError(f"[latency]: {exc}") from None


def _early_stopping(data: Any, epochs: int) -> EarlyStoppingSpec:
    spec = read_table(EarlyStoppingSpec, data, "[early_stopping]")
    # The default just has no rungs; so does a stored spec (it lists every default) read back to resume it.
    chosen = "min_epochs" in data and spec.min_epochs != EarlyStoppingSpec.min_epochs
    if spec.enabled and spec.min_epochs >= epochs and chosen:
        raise SpecError(
            f"'min_epochs' in [early_stopping] is {spec.min_epochs} but [task] trains only {epochs} epochs, so no "
            "trial could ever stop early; lower min_epochs or set enabled = false."
        )
    return spec


def _artifacts(location: str | None) -> str | None:
    if location is None:
        return None
    try:  # the form only: a machine reading a stored spec need not have the store's client installed
        return check_artifact_location(location, importable=False)
    except ExplorerError as exc:
        raise SpecError(f"'artifacts' at the top level: {exc}") from None


def _raw_space(t: Table, model: ModelSpec) -> Any:
    """The [space] table as written; a trained checkpoint's study may leave it out (the checkpoint fills it)."""
    return t.raw("space", {}) if model.pretrained is not None else t.raw("space")


def spec_from_dict(data: Mapping[str, Any], *, stored: bool = False) -> StudySpec:
    """Build and fully check a spec from a parsed TOML document, or (``stored``) from the
    :meth:`StudySpec.stored` dict of a study, possibly written by an older explorer.

    Sizes are checked against explorer.limits first, and the space's architectures counted, unless the
    spec is ``stored`` (read back from a study, accepted when it was created).
    """
    if not stored:
        check_raw(data)
    data = dict(data) if isinstance(data, Mapping) else data
    t = Table(data, "the top level", table_keys(StudySpec))
    name = check_study_name(t.text("name"))
    task = read_task(t.raw("task"))
    objectives = read_objectives(t.raw("objectives", {}), task)
    budgets = read_budgets(t.raw("budgets", {}), task)
    wanted = bool(objectives.decode or budgets.max_decode_ms or budgets.max_kv_cache_mb)
    decode = read_decode(t.raw("decode", None), task, wanted)
    model = read_model(t.raw("model", {}), task, decode)
    spec = read_table(
        StudySpec,
        data,
        "the top level",
        name=name,
        task=task,
        space=_space(pretrained_defaults(model, space_defaults(model, _raw_space(t, model)), stored)),
        model=model,
        objectives=objectives,
        latency=_latency(t.raw("latency", {})),
        decode=decode,
        budgets=budgets,
        early_stopping=_early_stopping(t.raw("early_stopping", {}), task.epochs),
        finalists=read_finalists(
            t.raw("finalists", {}), task, stored=stored, fixed_split=model.pretrained is not None
        ),
        answer=read_answer(t.raw("answer", {}), task, stored=stored),
        tracking=read_tracking(t.raw("tracking", {})),
    )
    spec = dataclasses.replace(spec, artifacts=_artifacts(spec.artifacts))
    # what a transformers class cannot hold, before the space
    check_hf(spec.model, spec.space, task, spec.latency)
    check_pretrained(spec.model, spec.space, task, stored)
    check_space(spec.space)  # an empty or impossible space is a spec error, found here
    if not stored:
        check_layouts(spec.space)
    return spec


def load_spec(path: str | Path, overrides: Sequence[str] = ()) -> StudySpec:
    """Read and check a TOML study spec, with ``overrides`` (``TABLE.KEY=VALUE``, :mod:`explorer.spec._overrides`)
    written into it first so they are checked exactly as the file is; any problem is one :class:`SpecError`
    sentence. The spec's ``origin`` says which keys the file set and which an override did."""
    parsed = [parse_override(text) for text in overrides]
    data = read_spec_file(path)
    try:
        spec = spec_from_dict(apply_overrides(data, parsed))
    except SpecError as exc:
        named = [o for o in parsed if any(f"{o.path[-1]!r} {w} " in str(exc) for w in ("in", "at"))]
        raise SpecError(mask_url(f"--set {named[-1].text}: {exc}" if named else str(exc))) from None
    return dataclasses.replace(spec, origin=tuple(sorted(key_sources(data, parsed).items())))


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """The parsed TOML document of a spec file, not yet checked; an unreadable file is one SpecError line."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        try:
            import tomli as tomllib
        except ImportError:
            raise SpecError(
                "reading TOML specs on Python 3.10 needs tomli; `pip install tomli` or use 3.11+."
            ) from None
    path = Path(path)
    check_file_size(path, "spec")  # read whole: a spec of gigabytes (or /dev/zero) is refused unread
    try:
        # utf-8-sig: a byte-order mark some editors write is not part of the TOML
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SpecError(f"no spec file {str(path)!r}; check the path (specs live under studies/).") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"cannot read spec {str(path)!r} ({exc.__class__.__name__}); give a readable UTF-8 TOML file."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path} is not valid TOML: {exc}; fix the syntax there.") from None
    except RecursionError:
        raise SpecError(
            f"{path} nests tables or arrays too deeply to read; a spec needs two levels."
        ) from None
    return data
