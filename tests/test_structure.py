"""The shape of the package: stage packages import downward only, no import circles, no private names used
across modules, modules of one job (see "How the code is laid out" in the README)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"
# Lower stages never import higher ones. Leaves (errors) may be imported by anyone and import nothing.
STAGES = {
    "engine": 0,
    "search": 1,
    "insight": 2,
    "analysis": 2.5,  # needs trained weights (torch): above insight's pure statistics, below the report
    "output": 3,
    "api": 4,
    "runs": 4,  # explorer/runs.py: the study-running workflows api.py re-exports
    "commands": 5,
    "cli": 6,
    "__init__": 7,
}
LEAVES = {"explorer.errors", "explorer.meta"}
MAX_LINES = 400  # docstrings count: a module past it does more than one job, and no module is exempt


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def stage(module: str) -> int | None:
    parts = module.split(".")
    if module in LEAVES:
        return None
    if len(parts) == 1:
        return STAGES["__init__"]
    return STAGES.get(parts[1])


def imports(module: str) -> list[tuple[str, list[str], int]]:
    """(imported explorer module, names taken from it, line) for every import in the module, nested ones too."""
    tree = ast.parse(MODULES[module].read_text())
    out = []
    package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "explorer":
                    out.append((alias.name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.split(".")[0] != "explorer":
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in MODULES:  # `from explorer.search import study`: the module itself
                    out.append((target, [], node.lineno))
                else:
                    out.append((base, [alias.name], node.lineno))
    return out


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for target, _, _ in imports(m):
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != m:
                graph[m].add(target)
    return graph


def test_stage_packages_import_downward_only():
    upward = []
    for m in MODULES:
        for target, _, line in imports(m):
            s_from, s_to = stage(m), stage(target)
            if s_to is None or s_from is None:
                continue
            if s_to > s_from:
                upward.append(f"{m}:{line} imports {target}")
    assert upward == []


def test_leaves_import_nothing_from_explorer():
    for leaf in LEAVES:
        assert imports(leaf) == [], leaf


def test_no_import_circles_even_inside_functions():
    graph = edges()
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_no_private_name_is_imported_across_modules():
    private = [
        f"{m}:{line} takes {name} from {target}"
        for m in MODULES
        for target, names, line in imports(m)
        for name in names
        if name.startswith("_") and name != "__version__"
    ]
    assert private == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_have_one_job_and_stay_short(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"{module} has {lines} lines (at most {MAX_LINES}): split it into modules of one job each and update "
        "its importers; shortening its docstrings or comments is not the fix"
    )


def test_the_structure_test_can_fail(tmp_path, monkeypatch):
    """The checks above really look: an upward import planted in a copy of a module is found."""
    engine_module = "explorer.engine.schedules"
    planted = tmp_path / "schedules.py"
    planted.write_text(MODULES[engine_module].read_text() + "\nfrom explorer.output import report\n")
    monkeypatch.setitem(MODULES, engine_module, planted)
    with pytest.raises(AssertionError, match="explorer.engine.schedules:.* imports explorer.output.report"):
        test_stage_packages_import_downward_only()
