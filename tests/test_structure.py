"""The shape of the package: concept packages that import downward only, each behind its public surface (its
``__init__``), no import circles, no private names used across modules (see docs/layout.md); and below the entry
points, stages, roles, verdicts and evidence typed, not strings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"
# Each concept package and top-level module by rank: a module imports only from lower ranks or its own package.
RANKS = {
    "limits": 0,
    "measurements": 0,
    "hooks": 0,
    "fields": 1,
    "layout": 2,
    "storage": 3,
    "model": 3,
    "data": 3,
    "spec": 4,
    "pretrained": 4,
    "measure": 5,
    "answer": 5,
    "study": 6,
    "analysis": 7,
    "output": 8,
    "api": 9,
    "cli": 10,
    "__main__": 11,
    "__init__": 11,
}
LEAVES = {"explorer.errors", "explorer.meta"}  # imported by anyone, import nothing from explorer
CONCEPTS = sorted(name for name in RANKS if (PACKAGE / name / "__init__.py").exists())


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def unit(module: str) -> str:
    """The package or top-level module a module belongs to: explorer.answer._rule -> answer."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


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
                if target in MODULES:  # `from explorer.study import _workers`: the module itself
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


def test_every_module_has_a_rank():
    unranked = sorted(m for m in MODULES if m not in LEAVES and unit(m) not in RANKS)
    assert unranked == []


def test_packages_import_downward_only():
    upward = []
    for m in MODULES:
        if m in LEAVES:
            continue
        for target, _, line in imports(m):
            if target in LEAVES or unit(target) == unit(m):
                continue
            if RANKS[unit(target)] >= RANKS[unit(m)]:
                upward.append(f"{m}:{line} imports {target}")
    assert upward == []


def test_leaves_import_nothing_from_explorer():
    for leaf in LEAVES:
        assert imports(leaf) == [], leaf


def test_a_package_is_entered_through_its_surface():
    """Outside a concept package, nothing names its private modules: `from explorer.answer import decide`."""
    behind = [
        f"{m}:{line} imports {target}"
        for m in MODULES
        for target, _, line in imports(m)
        if unit(target) in CONCEPTS and unit(target) != unit(m) and target != f"explorer.{unit(target)}"
    ]
    assert behind == []


@pytest.mark.parametrize("package", CONCEPTS)
def test_a_package_keeps_its_implementation_private(package):
    """Every module of a concept package is private; its __init__.pyi lists the public surface, which its
    __init__.py loads name by name on first use (lazy_loader.attach_stub), and each listed name exists."""
    folder = PACKAGE / package
    public = sorted(p.name for p in folder.glob("*.py") if not p.name.startswith("_"))
    assert public == []
    init = ast.parse(MODULES[f"explorer.{package}"].read_text())
    assert ast.get_docstring(init), (
        f"explorer/{package}/__init__.py has no docstring saying what the package is"
    )
    assert "lazy_loader.attach_stub(__name__, __file__)" in MODULES[f"explorer.{package}"].read_text()
    stub = ast.parse((folder / "__init__.pyi").read_text())
    for node in ast.walk(stub):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 1 and (folder / f"{node.module}.py").exists(), ast.unparse(node)
            defined = ast.parse((folder / f"{node.module}.py").read_text())
            top = {n.name for n in defined.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            top |= {
                name.id
                for n in defined.body
                if isinstance(n, ast.Assign)
                for target in n.targets
                for name in ast.walk(target)
                if isinstance(name, ast.Name)
            }
            imported = {
                a.asname or a.name for n in defined.body if isinstance(n, ast.ImportFrom) for a in n.names
            }
            for alias in node.names:
                assert alias.asname == alias.name, (
                    f"{package}: write `{alias.name} as {alias.name}` (a re-export)"
                )
                assert alias.name in top | imported | {
                    n.target.id
                    for n in defined.body
                    if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                }, f"explorer.{package}.{node.module} has no {alias.name}"


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


# Where a user's words for a device come in (the command line, the library's workflows): only there is a name
# turned into a torch.device by as_device; everything below takes a torch.device.
DEVICE_ENTRIES = ("explorer.cli", "explorer.api")


def device_names_below_the_entries() -> list[str]:
    """Parameters below the entry points typed to take a device name as well as a device (``torch.device | str``,
    in any order), and calls of ``as_device`` there (its own definition aside)."""
    found = []
    for m, path in sorted(MODULES.items()):
        if any(m == e or m.startswith(f"{e}.") for e in DEVICE_ENTRIES):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "as_device":
                a = node.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                    if arg is None or arg.annotation is None:
                        continue
                    note = arg.annotation
                    text = note.value if isinstance(note, ast.Constant) else ast.unparse(note)
                    if {"torch.device", "str"} <= {part.strip() for part in str(text).split("|")}:
                        found.append(f"{m}:{arg.lineno} {node.name}({arg.arg}: {text})")
            elif isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if name == "as_device":
                    found.append(f"{m}:{node.lineno} calls as_device")
    return found


def test_a_device_is_resolved_where_the_users_words_come_in():
    """Below the command line and explorer.api a device is a torch.device, resolved once above."""
    assert device_names_below_the_entries() == []


def plant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, code: str) -> None:
    """The checks read ``module`` from a copy of it with ``code`` appended (a violation planted there)."""
    planted = tmp_path / f"{module.rsplit('.', 1)[-1]}.py"
    planted.write_text(MODULES[module].read_text() + code)
    monkeypatch.setitem(MODULES, module, planted)


def test_the_device_test_can_fail(tmp_path, monkeypatch):
    """A name-or-device parameter and an as_device call planted in a copy of a module are both found."""
    low = "explorer.measure._latency"
    plant(
        tmp_path,
        monkeypatch,
        low,
        "\n\ndef planted(device: str | torch.device) -> torch.device:\n    return as_device(device)\n",
    )
    found = device_names_below_the_entries()
    assert any(f.startswith(f"{low}:") and "planted(device: str | torch.device)" in f for f in found)
    assert any(f.startswith(f"{low}:") and f.endswith("calls as_device") for f in found)


def test_the_structure_test_can_fail(tmp_path, monkeypatch):
    """The checks above really look: an upward import planted in a copy of a module is found."""
    low = "explorer.layout._schedules"
    plant(tmp_path, monkeypatch, low, "\nfrom explorer.output import write_report\n")
    with pytest.raises(AssertionError, match="explorer.layout._schedules:.* imports explorer.output"):
        test_packages_import_downward_only()


# Below the entry points (the command line and explorer.api) a stage, a trial's role, the rule's verdict and an
# answer's evidence are enums (storage.Role, answer.Verdict, answer.Evidence), never strings.
TYPED_NAMES = {"stage", "stages", "role", "roles", "verdict", "verdicts", "evidence"}
ENTRY_POINTS = ("explorer.cli", "explorer.api")
# str on purpose: words, not one of an enum's members
WORDS = {
    "explorer.analysis._rules:RuleVerdict.verdict",  # a rule of thumb's: "no difference larger than 2 points"
    "explorer.analysis._rules:RuleVerdict.evidence",  # ... and the sentence it rests on
    "explorer.answer._horizon:Shift.role",  # the part a layout plays in the horizon check, not a trial's role
}


def _names_str(annotation: ast.expr | None) -> bool:
    """Whether an annotation names ``str`` anywhere (``str``, ``Role | str``, ``Sequence[str]``, ``"str"``)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    return annotation is not None and any(
        isinstance(n, ast.Name) and n.id == "str" for n in ast.walk(annotation)
    )


def str_typed(module: str) -> list[str]:
    """``module:Owner.name`` for every parameter or class field of :data:`TYPED_NAMES` annotated with ``str``."""
    found = []

    def visit(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                for field in child.body:
                    if (
                        isinstance(field, ast.AnnAssign)
                        and isinstance(field.target, ast.Name)
                        and field.target.id in TYPED_NAMES
                        and _names_str(field.annotation)
                    ):
                        found.append(f"{module}:{owner}{child.name}.{field.target.id}")
                visit(child, f"{owner}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                    if arg is not None and arg.arg in TYPED_NAMES and _names_str(arg.annotation):
                        found.append(f"{module}:{owner}{child.name}({arg.arg})")
                visit(child, f"{owner}{child.name}.")
            else:
                visit(child, owner)

    visit(ast.parse(MODULES[module].read_text()), "")
    return found


def test_stages_roles_verdicts_and_evidence_are_typed_below_the_entry_points():
    below = [m for m in MODULES if not m.startswith(ENTRY_POINTS)]
    found = {name for m in below for name in str_typed(m)}
    stray = sorted(found - WORDS)
    assert not stray, f"annotated with str: {', '.join(stray)}"
    assert sorted(WORDS - found) == [], "a field kept as words is gone: take it off WORDS"


def test_the_typing_test_can_fail(tmp_path, monkeypatch):
    """A parameter ``stage: str`` and a field ``role: Role | str`` planted in a copy of a module are found."""
    module = "explorer.study._progress"
    plant(
        tmp_path,
        monkeypatch,
        module,
        "\n\ndef planted(stage: str) -> None: ...\n\n\nclass Planted:\n    role: 'Role | str'\n",
    )
    assert str_typed(module) == [f"{module}:planted(stage)", f"{module}:Planted.role"]
    with pytest.raises(AssertionError, match=r"explorer.study._progress:planted\(stage\)"):
        test_stages_roles_verdicts_and_evidence_are_typed_below_the_entry_points()
