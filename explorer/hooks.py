"""User code a study names: ``"package.module:function"`` or ``"path/to/file.py:function"``.

A task loader (``[task] name``) and a model builder (``[model] build``) are named this way, never passed as
objects, so that every process of a study (spawned workers, re-timing rounds, a resume next week) imports the
same function by name. A module name is imported as Python would, and, when that finds nothing, from the
working directory (as ``python -m`` and uvicorn's ``module:app`` do); a file path is resolved against the
working directory, as an ``.npz`` path is, and its folder is put on ``sys.path`` (as ``python file.py`` does) so
it can import its neighbours.

:func:`fingerprint` is the sha256 of the source files behind a reference (the named module's file and the file
that defines the function): stored with a study, it tells a resume that the code changed since.
:func:`checkpoint_digest` does the same for a trained checkpoint a study starts from (``[model] pretrained``).

Every problem (no such file or module, an import that fails, no such function, not callable) is one
:class:`ConfigError` naming the reference and the fix.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import keyword
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from explorer.errors import ConfigError

__all__ = ["REFERENCE_FORM", "fingerprint", "is_reference", "resolve"]

REFERENCE_FORM = "'package.module:function' or 'path/to/file.py:function'"


def _split(ref: str) -> tuple[str, str]:
    target, _, attr = ref.rpartition(":")
    return target, attr


def is_reference(name: str) -> bool:
    """Whether ``name`` has the form of a code reference (``target:function``, the function an identifier)."""
    target, attr = _split(name)
    return bool(target) and attr.isidentifier() and not keyword.iskeyword(attr)


def _file_module(path: Path, ref: str, what: str) -> ModuleType:
    """The module of a ``.py`` file, imported once per process under a name derived from its absolute path."""
    path = path.resolve()
    name = "explorer_user_" + hashlib.sha256(str(path).encode()).hexdigest()[:12] + "_" + path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{what} {ref!r}: {path} cannot be imported as Python; give a .py file.")
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # its neighbours import as they do under `python file.py`
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(
            f"{what} {ref!r}: importing {path} failed ({type(exc).__name__}: {exc}); fix that file "
            "(explorer -v shows the traceback)."
        ) from exc
    return module


def _named_module(target: str, ref: str, what: str) -> ModuleType:
    try:
        try:
            return importlib.import_module(target)
        except ModuleNotFoundError as exc:
            cwd = str(Path.cwd())
            if exc.name is None or not target.startswith(exc.name) or cwd in sys.path:
                raise
            sys.path.append(cwd)  # the working directory, after everything installed (uvicorn's rule)
            return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"{what} {ref!r}: cannot import module {target!r} ({exc}); install it, run explorer from the folder "
            "that holds it, or name a file instead: path/to/file.py:function."
        ) from None
    except Exception as exc:
        raise ConfigError(
            f"{what} {ref!r}: importing module {target!r} failed ({type(exc).__name__}: {exc}); fix it "
            "(explorer -v shows the traceback)."
        ) from exc


def _module(ref: str, what: str) -> ModuleType:
    if not is_reference(ref):
        raise ConfigError(f"{what} {ref!r} is not a code reference; write it as {REFERENCE_FORM}.")
    target, _ = _split(ref)
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ConfigError(
                f"{what} {ref!r}: no file {path} (relative paths start at the working directory "
                f"{Path.cwd()}); check the path."
            )
        return _file_module(path, ref, what)
    return _named_module(target, ref, what)


def resolve(ref: str, what: str) -> Callable[..., Any]:
    """The function ``ref`` names; ``what`` ("task", "model builder") starts every error message."""
    module = _module(ref, what)
    _, attr = _split(ref)
    fn = getattr(module, attr, None)
    if fn is None:
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        have = f"it defines {', '.join(public[:6])}" if public else "it defines no public function"
        raise ConfigError(f"{what} {ref!r}: {_split(ref)[0]} has no {attr!r} ({have}).")
    if not callable(fn):
        raise ConfigError(
            f"{what} {ref!r}: {attr} is a {type(fn).__name__}, not a function; name a function."
        )
    return fn


def _source_file(obj: Any) -> Path | None:
    try:
        name = inspect.getsourcefile(obj)
    except TypeError:  # a built-in or a C extension: no source to hash
        return None
    return Path(name).resolve() if name else None


def fingerprint(ref: str, what: str) -> str:
    """sha256 over the source files behind ``ref`` (its module's file and the function's own), in a fixed order."""
    fn = resolve(ref, what)
    files = {f for f in (_source_file(_module(ref, what)), _source_file(fn)) if f is not None}
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.read_bytes())
    return h.hexdigest()


def checkpoint_digest(folder: str | Path) -> str:
    """sha256 of a transformers checkpoint folder's ``config.json`` and safetensors weight files (their names and
    bytes, in name order): what a study's cuts of it depend on."""
    root = Path(folder).expanduser()
    digest = hashlib.sha256()
    for file in [*sorted(root.glob("*.safetensors")), root / "config.json"]:
        digest.update(file.name.encode())
        with file.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
