"""The documentation cannot drift from the code: the spec reference lists exactly the keys the spec readers
accept, and every link and record a page names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from explorer.search.spec_keys import SPEC_KEYS, TABLES

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


def test_the_spec_reference_lists_exactly_the_keys_the_readers_accept():
    documented = documented_keys((ROOT / "docs" / "spec.md").read_text())
    assert set(documented) == set(SPEC_KEYS), "a table is missing from docs/spec.md, or documented but unknown"
    for table, keys in SPEC_KEYS.items():
        expected = set(keys) - set(TABLES) if table == "" else set(keys)  # the tables have sections of their own
        assert documented[table] == expected, f"[{table or 'top level'}]: {documented[table] ^ expected}"


def test_the_reference_check_can_fail():
    text = (ROOT / "docs" / "spec.md").read_text().replace("| `folds` |", "| `fold_count` |")
    assert documented_keys(text)["finalists"] != set(SPEC_KEYS["finalists"])


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
