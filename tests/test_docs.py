"""The documentation cannot drift from the code: the spec reference lists exactly the keys the spec readers
accept, and every link and record a page names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer.spec._docs import TOP_LEVEL, marked_tables, spec_reference
from explorer.spec._keys import SPEC_KEYS, TABLES

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def documented_keys(text: str) -> dict[str, set[str]]:
    """Table name ("" for the top level) -> the keys in the first column of its section's table."""
    out: dict[str, set[str]] = {}
    table = None
    for line in text.splitlines():
        heading = re.match(r"^## (?:Top level|`\[(\w+)\]`)\s*$", line)
        if heading:
            table = heading.group(1) or ""
            out[table] = set()
        elif line.startswith("## "):
            table = None
        elif table is not None:
            row = re.match(r"^\| `(\w+)` \|", line)
            if row:
                out[table].add(row.group(1))
    return out


SPEC_PAGE = ROOT / "docs" / "spec.md"


def test_the_spec_reference_tables_are_what_the_fields_declare():
    text = SPEC_PAGE.read_text()
    assert marked_tables(text) == [TOP_LEVEL, *(f"[{t}]" for t in TABLES)], "a key table is not marked"
    assert text == spec_reference(text), "regenerate it: python -m explorer.spec._docs"


def test_the_spec_reference_lists_exactly_the_keys_the_readers_accept():
    documented = documented_keys(SPEC_PAGE.read_text())
    assert set(documented) == set(SPEC_KEYS), (
        "a table is missing from docs/spec.md, or documented but unknown"
    )
    for table, keys in SPEC_KEYS.items():
        expected = set(keys) - set(TABLES) if table == "" else set(keys)  # tables have sections of their own
        assert documented[table] == expected, f"[{table or 'top level'}]: {documented[table] ^ expected}"


def test_the_reference_checks_can_fail():
    text = SPEC_PAGE.read_text()
    renamed = text.replace("| `folds` |", "| `fold_count` |")
    assert documented_keys(renamed)["finalists"] != set(SPEC_KEYS["finalists"])
    assert spec_reference(renamed) != renamed  # a hand edit inside a generated table is undone
    assert spec_reference(text.replace("| `10` |", "| `15` |", 1)) == text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_and_record_a_page_names_exists(page):
    text = page.read_text()
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (page.parent / target).exists():
            missing.append(target)
    for record in set(re.findall(r"benchmarks/[\w./-]+\.(?:md|json|py)", text)):
        if not (ROOT / record).exists():
            missing.append(record)
    assert not missing, f"{page.name} names what does not exist: {sorted(set(missing))}"


# --- the README stays a README, and the index pages stay complete --------------------------------------------

README_MAX_LINES = 100


def readme_problems(text: str) -> list[str]:
    """What keeps ``text`` from being the README: too long, or not opening with its two commands (set-up, quickstart
    study and report; the tests) in one fenced block right under the title."""
    problems = []
    lines = text.splitlines()
    if len(lines) >= README_MAX_LINES:
        problems.append(f"{len(lines)} lines (keep it under {README_MAX_LINES}; the rest belongs in docs/)")
    opening = re.match(r"# explorer\n\n```bash\n(.*?)\n```\n", text, flags=re.S)
    if not opening:
        return [*problems, "the README does not open with a ```bash block under its title"]
    commands = [line for line in opening.group(1).splitlines() if not line.startswith("#")]
    if len(commands) != 2:
        problems.append(f"the opening block holds {len(commands)} commands, not 2")
    elif not (
        commands[0].startswith("python3 -m venv .venv && ")
        and "explorer study run studies/quickstart.toml" in commands[0]
        and commands[0].endswith("explorer report quickstart")
        and "python -m pytest" in commands[1]
    ):
        problems.append("the opening commands are not set-up + quickstart study + report, then the tests")
    return problems


def test_the_readme_is_short_and_opens_with_its_two_commands():
    assert readme_problems((ROOT / "README.md").read_text()) == []


def test_the_readme_check_can_fail():
    text = (ROOT / "README.md").read_text()
    assert readme_problems(text + "more\n" * README_MAX_LINES)
    assert readme_problems(text.replace("explorer report quickstart", "explorer report other", 1))
    assert readme_problems(text.replace("```bash", "```", 1))


def unlisted(text: str, names: set[str]) -> set[str]:
    """The names that no table row of ``text`` opens with, as `` | `NAME` | ``."""
    listed = set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))
    return names - listed


def benchmark_scripts() -> set[str]:
    """Every script in benchmarks/: its shell scripts and Python files, less the package marker and the helper
    modules the scripts import (``from benchmarks.common import ...``)."""
    files = [
        p for p in (ROOT / "benchmarks").iterdir() if p.suffix in (".py", ".sh") and p.name != "__init__.py"
    ]
    sources = " ".join(p.read_text() for p in files if p.suffix == ".py")
    helpers = set(re.findall(r"(?:from|import) benchmarks\.(\w+)", sources))
    helpers |= {
        m for group in re.findall(r"from benchmarks import ([\w, ]+)", sources) for m in group.split(", ")
    }
    return {f"benchmarks/{p.name}" for p in files if p.stem not in helpers}


def test_the_benchmarks_page_lists_every_script_and_every_record():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert unlisted(text, benchmark_scripts()) == set(), "add the script to docs/benchmarks.md"
    records = {f"benchmarks/{p.name}" for p in (ROOT / "benchmarks").glob("*.md")}
    assert {r for r in records if r not in text} == set(), "name the record in docs/benchmarks.md"


def test_the_benchmarks_check_can_fail():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    rows = [line for line in text.splitlines() if not line.startswith("| `benchmarks/chaos.py` |")]
    assert "benchmarks/chaos.py" in unlisted("\n".join(rows), benchmark_scripts())


def unnamed_modules(text: str) -> set[str]:
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "explorer").rglob("*.py")}
    return modules - set(re.findall(r"`(explorer/[\w/]+\.py)`", text))


def test_the_layout_page_names_every_module():
    assert unnamed_modules((ROOT / "docs" / "layout.md").read_text()) == set(), "add it to docs/layout.md"


def test_the_layout_check_can_fail():
    text = (ROOT / "docs" / "layout.md").read_text().replace("`explorer/model/_attention.py`", "attention")
    assert "explorer/model/_attention.py" in unnamed_modules(text)


ISSUE_NUMBER = re.compile(r"(?<![\w/])#\d+\b|\bissues?\s+#?\d+", flags=re.I)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_cites_an_issue_number(page):
    assert ISSUE_NUMBER.findall(page.read_text()) == []


def test_the_issue_number_check_can_fail():
    assert ISSUE_NUMBER.findall("as asked in #12") and ISSUE_NUMBER.findall("see issue 7")
    assert not ISSUE_NUMBER.findall("[method.md](method.md#3-the-answer)")


def html_escapes(text: str) -> list[str]:
    """HTML character references in Markdown (``&lt;`` for ``<``): a report written through an HTML escaper."""
    return re.findall(r"&(?:lt|gt|amp|quot|#\d+);", text)


def test_committed_markdown_holds_no_html_escapes():
    pages = [*PAGES, *(ROOT / "reports").rglob("*.md"), *(ROOT / "benchmarks").glob("*.md")]
    escaped = {str(p.relative_to(ROOT)) for p in pages if html_escapes(p.read_text(encoding="utf-8"))}
    assert not escaped, f"Markdown should read as Markdown, not HTML: {sorted(escaped)}"
    assert html_escapes("d_k &lt; 16") == ["&lt;"]  # the check can fail


DATE_OR_COMMIT = re.compile(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}|\b[0-9a-f]{7}\b")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_names_a_date_or_a_commit(page):
    """The pages say what the tool does now; dated records and the commits they ran at live in benchmarks/*.md."""
    assert DATE_OR_COMMIT.findall(page.read_text()) == []


def test_the_date_and_commit_check_can_fail():
    assert DATE_OR_COMMIT.findall("recorded 2026-12-05 04:06") == ["2026-12-05"]
    assert DATE_OR_COMMIT.findall("at commit 8b76815") == ["8b76815"]
    assert not DATE_OR_COMMIT.findall(
        "16,16 at 97.08%, 1,527 images, [method.md](method.md#4-what-the-rule-costs)"
    )
