"""How the code says what it means: the figures of the review that asked for one vocabulary below the entry points.

    python -m benchmarks.vocabulary [--record benchmarks/vocabulary.md]

Read from the source (ast) and from fresh interpreters, nothing timed:

* strings where the code has types: parameters and fields named stage, role, verdict or evidence annotated ``str``
  below the entry points (explorer.cli, explorer.api), and the stage words ("search", "finalist", "timing") as
  string literals in explorer/study/_runs.py;
* values re-resolved below the entry points: parameters typed ``torch.device | str``, and ``as_device`` calls;
* ways to open a study: call sites of ``optuna.load_study`` / ``optuna.create_study`` by module (explorer's own
  :class:`explorer.study.Study` opens, creates and reopens studies; the others load a study through a storage
  connection already open), and any ``StudyHandle`` left;
* surfaces: the public names each package's ``__init__.pyi`` lists, and the names private modules list in an
  ``__all__`` of their own;
* imports: the explorer modules ``import explorer``, ``import explorer.api`` and ``explorer study status`` load
  (and whether torch, Optuna or pandas come with them);
* names: module basenames found in more than one place.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import ROOT, append_record, commit, markdown_table, record_block

PACKAGE = ROOT / "explorer"
ENTRY_POINTS = ("explorer/cli/", "explorer/api.py")
TYPED_NAMES = {"stage", "stages", "role", "roles", "verdict", "verdicts", "evidence"}
STAGE_WORDS = {"search", "finalist", "timing"}


def _sources() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))}


def _annotation(node: ast.expr | None) -> str:
    if node is None:
        return ""
    return str(node.value) if isinstance(node, ast.Constant) else ast.unparse(node)


def str_typed(trees: dict[str, ast.Module]) -> list[str]:
    """Parameters and fields named for a stage, role, verdict or evidence, annotated ``str``, below the entry
    points."""
    found = []
    for path, tree in trees.items():
        if path.startswith(ENTRY_POINTS):
            continue
        for node in ast.walk(tree):
            pairs: list[tuple[str, ast.expr | None, int]] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                pairs = [(x.arg, x.annotation, x.lineno) for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                pairs = [(node.target.id, node.annotation, node.lineno)]
            for name, note, line in pairs:
                if name in TYPED_NAMES and "str" in {p.strip() for p in _annotation(note).split("|")}:
                    found.append(f"{path}:{line} {name}: {_annotation(note)}")
    return found


def stage_words(trees: dict[str, ast.Module]) -> int:
    tree = trees["explorer/study/_runs.py"]
    return sum(isinstance(n, ast.Constant) and n.value in STAGE_WORDS for n in ast.walk(tree))


def device_names(trees: dict[str, ast.Module]) -> tuple[list[str], list[str]]:
    """``torch.device | str`` parameters (anywhere), and ``as_device`` calls by module."""
    params, calls = [], []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                    if {"torch.device", "str"} <= {p.strip() for p in _annotation(arg.annotation).split("|")}:
                        params.append(f"{path}:{arg.lineno} {node.name}({arg.arg})")
            elif isinstance(node, ast.Call):
                f = node.func
                if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) == "as_device":
                    calls.append(f"{path}:{node.lineno}")
    return params, calls


def study_openers(trees: dict[str, ast.Module]) -> tuple[collections.Counter, int]:
    """Call sites of optuna.load_study / optuna.create_study by module, and mentions of StudyHandle."""
    sites: collections.Counter = collections.Counter()
    handles = 0
    for path, tree in trees.items():
        for node in ast.walk(tree):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if call and node.func.attr in ("load_study", "create_study"):
                sites[path] += 1
            if isinstance(node, ast.Name) and node.id == "StudyHandle":
                handles += 1
    return sites, handles


def surfaces(trees: dict[str, ast.Module]) -> tuple[dict[str, int], int]:
    """Public names per package (its __init__.pyi) and names in private modules' own __all__ lists."""
    public = {}
    for stub in sorted(PACKAGE.glob("*/__init__.pyi")):
        tree = ast.parse(stub.read_text())
        public[stub.parent.name] = sum(len(n.names) for n in tree.body if isinstance(n, ast.ImportFrom))
    private = 0
    for path, tree in trees.items():
        if not Path(path).name.startswith("_") or Path(path).name == "__init__.py":
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                private += len(getattr(node.value, "elts", []))
    return public, private


PROBE = (
    "import sys, json\n"
    "{code}\n"
    "mods = sorted(m for m in sys.modules if m == 'explorer' or m.startswith('explorer.'))\n"
    "heavy = [m for m in ('torch', 'optuna', 'pandas') if m in sys.modules]\n"
    "print(json.dumps([len(mods), heavy]))\n"
)


def loaded(code: str, cwd: Path) -> tuple[int, list[str]]:
    """The explorer modules a fresh interpreter has loaded after ``code``, and which of torch, Optuna and pandas."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code)], cwd=cwd, capture_output=True, text=True, check=True
    )
    n, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    return n, heavy


def status_probe(folder: Path) -> str:
    """``explorer study status`` of a small stored study (no training), as code for :func:`loaded`."""
    from benchmarks.cli_startup import make_study

    url = make_study(folder)
    return (
        "from click.testing import CliRunner\nfrom explorer.cli import main\n"
        f"assert CliRunner().invoke(main, ['study', 'status', 'startup', '--storage', {url!r}]).exit_code == 0"
    )


def repeated_basenames() -> list[str]:
    """Module names (without the private underscore) that more than one module file has, across packages and
    the top level (a package's own main module, study/_study.py, is not a repeat)."""
    names = collections.Counter(p.stem.lstrip("_") for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")
    return sorted(n for n, k in names.items() if k > 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, help="append a dated markdown block to this file")
    args = parser.parse_args(argv)
    trees = _sources()
    typed = str_typed(trees)
    params, calls = device_names(trees)
    sites, handles = study_openers(trees)
    public, private = surfaces(trees)
    with tempfile.TemporaryDirectory(prefix="explorer-vocabulary-") as tmp:
        env_code = {
            "import explorer": "import explorer",
            "import explorer.api": "import explorer.api",
            "explorer study status NAME": status_probe(Path(tmp)),
        }
        imports = {label: loaded(code, Path(tmp)) for label, code in env_code.items()}
    modules = sum(1 for _ in PACKAGE.rglob("*.py"))
    repeated = repeated_basenames()
    rows = [
        [
            "stage/role/verdict/evidence annotated str below the entry points (words on purpose: below)",
            len(typed),
        ],
        ['"search"/"finalist"/"timing" string literals in study/_runs.py', stage_words(trees)],
        ["parameters typed torch.device | str", len(params)],
        ["as_device calls", len(calls)],
        ["StudyHandle mentions", handles],
        ["optuna.load_study/create_study call sites", sum(sites.values())],
        ["public names in the packages' surfaces (__init__.pyi)", sum(public.values())],
        ["names in private modules' own __all__", private],
        *[[f"explorer modules loaded by `{label}` (of {modules})", n] for label, (n, _) in imports.items()],
        ["module basenames in more than one place", len(repeated)],
    ]
    lines = [
        markdown_table(["figure", "now"], rows, "lr"),
        "",
        "Details:",
        "",
        f"- `torch.device | str` parameters: {', '.join(params) or 'none'}; `as_device` calls: "
        f"{', '.join(calls) or 'none'}",
        "- study opening call sites by module: "
        + ", ".join(f"{path} {n}" for path, n in sorted(sites.items())),
        "- public names by package: " + ", ".join(f"{pkg} {n}" for pkg, n in public.items()),
        "- torch, Optuna or pandas loaded: "
        + "; ".join(f"`{label}`: {', '.join(heavy) or 'none'}" for label, (_, heavy) in imports.items()),
        f"- str-typed names: {', '.join(typed) or 'none'}; repeated basenames: {', '.join(repeated) or 'none'}",
    ]
    block = record_block(
        "the vocabulary figures",
        [f"commit: {commit()}", "read from the source and fresh interpreters; nothing timed"],
        lines,
    )
    print(block)
    append_record(
        args.record,
        block,
        title="# The code's vocabulary, measured\n\nWritten by `benchmarks/vocabulary.py`; newest block last.",
    )


if __name__ == "__main__":
    main()
