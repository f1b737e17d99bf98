"""OutputFolder: the folder is checked before any work and made only by the first write, so a command refused
between the check and the writing leaves the disk as it was; only the folder's own files are ever replaced."""

from __future__ import annotations

import os
import stat

import pytest

from explorer.errors import ConfigError
from explorer.output import OutputFolder
from explorer.output._result_folders import MANIFEST, as_user_made


def tree(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_new_folder_appears_only_with_its_first_file(tmp_path) -> None:
    folder = OutputFolder(tmp_path / "a" / "b")
    assert tree(tmp_path) == []  # checked, not made: a command that stops here changes nothing
    folder.write("x.csv", "1\n")
    assert folder.finish() == [tmp_path / "a" / "b" / "x.csv"]
    assert tree(tmp_path) == ["a", "a/b", f"a/b/{MANIFEST}", "a/b/x.csv"]


@pytest.mark.parametrize("where", ["note.txt/out", "note.txt/out/deeper", "note.txt"])
def test_a_path_through_or_onto_a_file_is_one_line_and_changes_nothing(tmp_path, where) -> None:
    (tmp_path / "note.txt").write_text("mine")
    with pytest.raises(ConfigError) as info:
        OutputFolder(tmp_path / where)
    assert "\n" not in str(info.value) and "note.txt" in str(info.value) and "folder" in str(info.value)
    assert tree(tmp_path) == ["note.txt"] and (tmp_path / "note.txt").read_text() == "mine"


def test_an_unwritable_place_is_refused_before_any_work() -> None:
    with pytest.raises(ConfigError, match="cannot write into --out /proc/explorer-out"):
        OutputFolder("/proc/explorer-out")  # /proc refuses new folders, even to root


def test_a_folder_holding_a_users_files_is_refused_unless_forced_and_then_left_alone(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="holds files explorer did not write"):
        OutputFolder(tmp_path)
    folder = OutputFolder(tmp_path, force=True)
    folder.write("report.md", "# hi\n")
    folder.finish()
    again = OutputFolder(tmp_path)  # now it has a manifest: explorer's own files may be replaced
    again.write("other.md", "x")
    again.finish()
    assert tree(tmp_path) == [MANIFEST, "notes.txt", "other.md"]  # report.md was ours; notes.txt is untouched
    assert (tmp_path / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_files_get_the_mode_the_users_umask_gives(tmp_path, umask) -> None:
    """Written through a temporary file (0600 as made), each file ends as a plain open() would make it."""
    made = tmp_path / "model.onnx"
    os.close(os.open(made, os.O_CREAT | os.O_WRONLY, 0o600))  # as tempfile.mkstemp makes a file
    previous = os.umask(umask)
    try:
        written = OutputFolder(tmp_path / "out").write("report.html", "<p>x</p>")
        as_user_made(made)  # what export and the hf folder call on their files
    finally:
        os.umask(previous)
    assert stat.S_IMODE(written.stat().st_mode) == stat.S_IMODE(made.stat().st_mode) == 0o666 & ~umask
