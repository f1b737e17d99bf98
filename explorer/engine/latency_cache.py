"""The latency cache: measured latencies kept per architecture and measurement setup, so a second request for
the same figure does not measure again.

One small JSON file per key (architecture + input + batch + threads + dtype + device + torch version), named by
the key's sha256 and written atomically, in ``$EXPLORER_CACHE_DIR`` (default ``~/.cache/explorer/latency``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path

from explorer.engine.measures import LatencyResult

__all__ = ["LatencyCache"]


def _default_cache_dir() -> Path:
    env = os.environ.get("EXPLORER_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "explorer" / "latency"


class LatencyCache:
    """A directory of JSON files, one per key (named by the key's sha256), written atomically.

    Atomic writes (a temporary file in the same directory, then ``os.replace``) mean that workers sharing the
    directory never read a half-written file. A file that cannot be read back is treated as missing, so a
    corrupt entry is simply measured again and overwritten.

    Args:
        directory: where the files live; default ``$EXPLORER_CACHE_DIR`` or ``~/.cache/explorer/latency``.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None):
        self.directory = Path(directory).expanduser() if directory is not None else _default_cache_dir()

    def path(self, key: str) -> Path:
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()}.json"

    def get(self, key: str) -> LatencyResult | None:
        """The stored result for ``key`` marked ``cached=True``, or None when absent or unreadable."""
        try:
            data = json.loads(self.path(key).read_text())
            if data["key"] != key:
                return None
            return dataclasses.replace(LatencyResult.from_dict(data["result"]), cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, result: LatencyResult) -> None:
        """Store ``result`` under ``key`` (replacing any previous entry) atomically."""
        self.directory.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(
            {"key": key, "result": dataclasses.replace(result, cached=False).to_dict()}, indent=1
        )
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(payload)
            os.replace(tmp, self.path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
