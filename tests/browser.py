"""A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): the standard
library alone, no browser driver package. Opens one page, records every request it makes, evaluates a script in
it and screenshots it."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's package is ``chromium``), or None."""
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


class Page:
    """One page of a headless Chromium; ``requests`` holds every URL it asked for, in order."""

    def __init__(self, binary: str, timeout: float = 60.0):
        self.timeout = timeout
        self.requests: list[str] = []
        self._events: list[dict[str, Any]] = []
        self._next_id = 0
        self._profile = tempfile.TemporaryDirectory(prefix="explorer-chromium-")
        to_browser, self._send_fd = os.pipe()
        self._recv_fd, from_browser = os.pipe()
        args = [
            binary,
            "--headless",
            "--remote-debugging-pipe",
            "--no-first-run",
            "--disable-gpu",
            "--window-size=1200,900",
        ]
        args += ["--no-sandbox", f"--user-data-dir={self._profile.name}", "--disable-background-networking"]
        args += ["--disable-component-update", "--disable-sync", "--no-default-browser-check"]

        def pipes() -> None:  # the protocol's pipe is the browser's fd 3 (in) and 4 (out)
            os.dup2(to_browser, 3)
            os.dup2(from_browser, 4)

        self._process = subprocess.Popen(
            args,
            close_fds=False,  # closing runs after preexec_fn: it would close fds 3 and 4 again
            preexec_fn=pipes,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Network.enable", session=True)
        self.call("Page.enable", session=True)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._recv_fd, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        doc = json.loads(message)
        if doc.get("method") == "Network.requestWillBeSent":
            self.requests.append(doc["params"]["request"]["url"])
        return doc

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._send_fd, json.dumps(message).encode() + b"\0")
        while True:
            doc = self._read()
            if doc.get("id") == self._next_id:
                if "error" in doc:
                    raise RuntimeError(f"{method}: {doc['error']}")
                return doc["result"]
            self._events.append(doc)

    def wait_for(self, event: str) -> None:
        if any(e.get("method") == event for e in self._events):
            return
        while self._read().get("method") != event:
            pass

    def open(self, url: str) -> None:
        """Navigate to ``url`` and wait until it has loaded (every image included)."""
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression evaluated in the page."""
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """The whole page as a PNG at ``path``."""
        shot = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):  # it may be gone already
            self.call("Browser.close")
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._send_fd)
        os.close(self._recv_fd)
        self._profile.cleanup()

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
