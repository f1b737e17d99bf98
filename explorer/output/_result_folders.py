"""Writing result folders safely: only the files a command owns are ever replaced, each one atomically.

A folder written by explorer holds a manifest (``.explorer-report``) naming the files it wrote. Writing there
again replaces those files and removes the ones the new result no longer has; a folder holding files explorer
did not write is refused unless ``force`` is given, and even then nothing but explorer's own files is touched.
The folder is checked (tested for writing) before any work starts, so a long computation never ends in a failed
write; a new folder is created only by the first write, so a command refused after the check (a bad trial
number, no completed trial) leaves the disk as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from explorer.errors import ConfigError

MANIFEST = ".explorer-report"


def as_user_made(path: str | Path) -> None:
    """Give a file written through a temporary file the mode a plain ``open()`` would have given it: 0666 less
    the user's umask. ``tempfile.mkstemp`` (and safetensors) create files 0600, readable by their owner alone,
    where reports and exports are meant for whoever the umask lets read them (a group, a web server)."""
    mask = os.umask(0)  # the only way to read the umask: set it, then put it back at once
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def _check_writable(out: Path, option: str) -> None:
    """Fail (one line) unless files can be written into ``out`` or, when it does not exist yet, it can be made.

    The test leaves no trace: a temporary file in ``out``, or a temporary folder in its nearest existing
    ancestor, made and removed at once (permission bits alone would not tell: root may write anywhere they say
    no, and a read-only file system refuses root too).
    """
    ancestor = out
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ConfigError(
            f"cannot write into {option} {out}: {ancestor} is a file, not a folder; choose a writable folder."
        )
    try:
        if ancestor == out:
            fd, probe = tempfile.mkstemp(dir=out, prefix=".write-test-")
            os.close(fd)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(dir=ancestor, prefix=".write-test-"))
    except OSError as exc:
        raise ConfigError(
            f"cannot write into {option} {out} ({exc.strerror}); choose a writable folder."
        ) from None


class OutputFolder:
    """A folder a command writes its files into (see the module docstring).

    Args:
        path: the folder.
        force: allow a folder that holds files explorer did not write (they are left alone).
        option: how the user named it, for messages (``--out``).
    """

    def __init__(self, path: str | Path, force: bool = False, option: str = "--out"):
        self.path = Path(path)
        self.option = option
        self.written: dict[str, Path] = {}
        out = self.path
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{option} {out} is a file; give a folder (new, empty, or one explorer wrote).")
        self.previous: set[str] = set()
        if out.is_dir():
            manifest = out / MANIFEST
            if manifest.is_file():
                self.previous = {
                    n.strip() for n in manifest.read_text().splitlines() if n.strip() and "/" not in n
                }
            elif any(out.iterdir()) and not force:
                raise ConfigError(
                    f"{option} {out} holds files explorer did not write; pick a new or empty folder, or add --force "
                    "to write explorer's files there (nothing else in it is touched)."
                )
        _check_writable(out, option)

    def write(self, name: str, data: bytes | str) -> Path:
        """Write ``name`` (a plain file name) atomically: a temporary file beside it, then a rename."""
        if "/" in name or (name.startswith(".") and name != MANIFEST):
            raise ValueError(f"not a plain file name: {name!r}")
        path = self.path / name
        payload = data.encode() if isinstance(data, str) else data
        try:
            self.path.mkdir(parents=True, exist_ok=True)  # a new folder appears with its first file
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(payload)
                as_user_made(tmp)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise ConfigError(
                f"cannot write {path} ({exc.strerror}); choose a writable {self.option}."
            ) from None
        self.written[name] = path
        return path

    def finish(self) -> list[Path]:
        """Remove what the previous result wrote and this one did not, record the manifest; return the files."""
        for stale in self.previous - set(self.written):
            (self.path / stale).unlink(missing_ok=True)
        self.write(MANIFEST, "\n".join(sorted(n for n in self.written if n != MANIFEST)) + "\n")
        return [p for n, p in sorted(self.written.items()) if n != MANIFEST]
