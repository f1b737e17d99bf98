"""What a study records of its own code (the user's task function and model builder, and a trained checkpoint it
starts from), and the check that it is unchanged; no torch, so the commands that only read a study check it too.

* :func:`code_record` is what the study stores about that code (user attribute ``code``): each reference and the
  sha256 of its source (:func:`explorer.hooks.fingerprint`).
* :func:`check_code` compares it with the code found now, before a resume, a confirm, an export of weights or a
  heads analysis runs it again: a module that is gone or changed is one error naming it (results from other code
  would not compare).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.errors import ConfigError, ExplorerError
from explorer.hooks import checkpoint_digest, fingerprint, is_reference
from explorer.spec import StudySpec

CODE_ATTR = "code"  # study user attribute: {"task" | "model": {"ref": ..., "sha256": ...}}


def _references(spec: StudySpec) -> dict[str, tuple[str, str]]:
    refs = {}
    if is_reference(spec.task.name):
        refs["task"] = (spec.task.name, "task")
    if spec.model.build is not None:
        refs["model"] = (spec.model.build, "model builder")
    if spec.model.pretrained is not None:
        refs["checkpoint"] = (spec.model.pretrained, "trained checkpoint")
    return refs


def _digest(key: str, ref: str, what: str) -> str:
    """The sha256 of a code reference's source, or of a trained checkpoint's files."""
    return checkpoint_digest(ref) if key == "checkpoint" else fingerprint(ref, what)


def code_record(spec: StudySpec) -> dict[str, dict[str, str]]:
    """Each of the spec's code references (and trained checkpoint) with the sha256 of its source (its files)."""
    return {k: {"ref": ref, "sha256": _digest(k, ref, what)} for k, (ref, what) in _references(spec).items()}


def check_code(stored: Mapping[str, Any], spec: StudySpec) -> None:
    """Raise a ConfigError when code the study was created with is missing or has changed (see the module
    docstring); a study stored without a record (no user code, or an older explorer) passes."""
    record = stored.get(CODE_ATTR) or {}
    for key, (ref, what) in _references(spec).items():
        if key not in record:
            continue
        try:
            now = _digest(key, ref, what)
        except (ExplorerError, OSError) as exc:
            raise ConfigError(
                f"study {spec.name!r} was created with {what} {ref!r}, which cannot be loaded here: {exc}"
            ) from None
        if now != record[key].get("sha256"):
            raise ConfigError(
                f"the {what} {ref!r} of study {spec.name!r} changed since the study was created (sha256 "
                f"{record[key].get('sha256', '?')[:12]} then, {now[:12]} now), so new results would not compare; "
                "restore that code, or run the changed code as a study of its own (a new name)."
            )
