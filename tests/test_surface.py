"""Every public name is tested: each name a package's ``__init__.pyi`` lists (its ``__all__``) is named, as a word,
in some test file."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import explorer

TESTS = Path(__file__).resolve().parent
PACKAGES = sorted(p.name for p in Path(explorer.__file__).parent.iterdir() if (p / "__init__.py").is_file())


def public_names() -> dict[str, tuple[str, ...]]:
    """Each package of explorer with the names its ``__all__`` makes public."""
    return {pkg: tuple(importlib.import_module(f"explorer.{pkg}").__all__) for pkg in PACKAGES}


def untested(names: dict[str, tuple[str, ...]], tests: Path = TESTS) -> list[str]:
    """``package.name`` for every name of ``names`` that no ``*.py`` file under ``tests`` names as a word (this
    file does not count: the names it uses as examples are not tested by it)."""
    files = [path for path in sorted(tests.rglob("*.py")) if path != Path(__file__).resolve()]
    text = "\n".join(path.read_text() for path in files)
    words = set(re.findall(r"\b\w+\b", text))
    return [f"{pkg}.{name}" for pkg, pkg_names in names.items() for name in pkg_names if name not in words]


def test_every_public_name_is_named_in_a_test():
    names = public_names()
    assert all(names.values()) and sum(map(len, names.values())) > 100, "the packages' surfaces were not read"
    missing = untested(names)
    assert not missing, f"{len(missing)} public names no test names: {', '.join(missing)}"


def test_a_public_name_no_test_names_is_reported(tmp_path):
    (tmp_path / "test_one.py").write_text(
        "from explorer.answer import decide\n\ndef test_it():\n    decide\n"
    )
    made_up = "a_name_" + "no_test_names"  # built, so this file does not name it either
    names = {"answer": ("decide", made_up), "storage": ("sqlite_path",)}
    assert untested(names, tmp_path) == [f"answer.{made_up}", "storage.sqlite_path"]
