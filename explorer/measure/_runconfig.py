"""Run configs: a small JSON file pinning one variant's task, architecture and training settings.

`explorer export` writes one for a study's trial; `explorer train --config FILE.json` reads it and retrains the
variant exactly (same config and seed on the same device give the same numbers).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

from explorer.errors import ConfigError
from explorer.layout import ModelConfig, TrainConfig
from explorer.limits import check_file_size

RUN_CONFIG_VERSION = 1


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """What a run config file holds."""

    task: str  # a built-in task, a path to a .npz file, or a user function (module:function)
    task_options: dict[str, Any]
    model: ModelConfig
    train: TrainConfig
    # the epoch training stopped at (early stopping or a plateau), if before the end
    stop_after: int | None = None
    source: dict[str, Any] = dataclasses.field(default_factory=dict)  # where it came from (study, trial...)
    build: str | None = None  # the user's model function ([model] build); None: explorer's own model
    hf: dict[str, Any] | None = None  # [model] hf: {"model_type": ..., "config": {...}}

    def to_dict(self) -> dict[str, Any]:
        # absent for explorer's models (files as before)
        build: dict[str, Any] = {"build": self.build} if self.build else {}
        build |= {"hf": dict(self.hf)} if self.hf else {}
        return {
            "explorer_run_config": RUN_CONFIG_VERSION,
            "task": self.task,
            "task_options": dict(self.task_options),
            "model": self.model.to_dict(),
            "train": dataclasses.asdict(self.train),
            "stop_after": self.stop_after,
            "source": dict(self.source),
        } | build


def write_run_config(path: str | Path, config: RunConfig) -> Path:
    """Write ``config`` to ``path`` atomically (a temporary file beside it, then a rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    made = [p for p in reversed(path.parents) if not p.exists()]  # folders made here, outermost first
    above = made[0].parent if made else path.parent
    if not above.is_dir():
        raise ConfigError(
            f"cannot write {path}: {above} is a file, not a folder; choose a writable --out path."
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(config.to_dict(), indent=2) + "\n")
        tmp.replace(path)
    except OSError as exc:
        # Leave the disk as it was: no temporary file, no folders made for a file that was not written.
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise ConfigError(f"cannot write {path} ({exc.strerror}); choose a writable --out path.") from None
    return path


def load_run_config(path: str | Path) -> RunConfig:
    """Read a run config; any problem is one ConfigError naming the file and what is wrong."""
    path = Path(path)
    check_file_size(path, "config file")  # read whole: a huge file (or /dev/zero) is refused unread
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; write one with `explorer export`.") from None
    except IsADirectoryError:
        raise ConfigError(
            f"config file {path} is a folder; give the JSON file `explorer export` wrote."
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config file {path} is not readable JSON ({exc}).") from None
    except RecursionError:
        raise ConfigError(
            f"config file {path} nests too deeply to be a run config; export it again."
        ) from None
    if not isinstance(doc, dict) or doc.get("explorer_run_config") != RUN_CONFIG_VERSION:
        raise ConfigError(
            f"{path} is not an explorer run config (version {RUN_CONFIG_VERSION}); "
            f"write one with `explorer export`."
        )
    try:
        return RunConfig(
            task=str(doc["task"]),
            task_options=dict(doc.get("task_options") or {}),
            model=ModelConfig.from_dict(doc["model"]),
            train=TrainConfig(**doc["train"]),
            stop_after=None if doc.get("stop_after") is None else int(doc["stop_after"]),
            source=dict(doc.get("source") or {}),
            build=None if doc.get("build") is None else str(doc["build"]),
            hf=_hf(doc.get("hf"), path),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"config file {path} is missing or has a malformed field ({exc}).") from None


def _hf(value: Any, path: Path) -> dict[str, Any] | None:
    """The ``hf`` entry: a model type and its config, as `explorer export` writes them for a [model] hf study."""
    if value is None:
        return None
    if not (
        isinstance(value, dict)
        and isinstance(value.get("model_type"), str)
        and isinstance(value.get("config", {}), dict)
    ):
        raise ConfigError(
            f'config file {path} has a malformed hf entry; it must be {{"model_type": ..., "config": {{...}}}} '
            "as `explorer export` writes it."
        )
    return {"model_type": value["model_type"], "config": dict(value.get("config", {}))}
