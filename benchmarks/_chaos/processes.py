"""Running explorer commands for the chaos scenarios: their environment, their processes, and waiting on them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import EXPLORER, explorer_env

WAIT_CAP_S = 600.0  # a generous cap on any wait: trials on a busy 2-core machine can take minutes
# every command started, each in its own session: killed at exit if still alive
STARTED: list[subprocess.Popen] = []


def base_env(cache_dir: Path) -> dict[str, str]:
    """Heartbeats every second and a 3-second grace period, so a killed trial goes stale in seconds."""
    return explorer_env(
        cache_dir,
        EXPLORER_HEARTBEAT_INTERVAL="1",
        EXPLORER_GRACE_PERIOD="3",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )


def cli_cmd(*args: str) -> list[str]:
    return [*EXPLORER, *args]


class Runner:
    """Runs commands in a working folder with the chaos environment, collecting their stderr."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self.cwd, self.env = cwd, env
        self.stderr: list[str] = []

    def run(self, *args: str, timeout: float = WAIT_CAP_S, env: dict[str, str] | None = None):
        proc = subprocess.run(
            cli_cmd(*args),
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.stderr.append(proc.stderr)
        return proc

    def start(self, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            cli_cmd(*args),
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=sigint_default,
        )
        STARTED.append(proc)
        return proc

    def collect(self, proc: subprocess.Popen, timeout: float = WAIT_CAP_S) -> str:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            err += "\n[chaos: killed after the cap]"
        self.stderr.append(err or "")
        return err or ""

    def tracebacks(self) -> int:
        return sum(e.count("Traceback (most recent call last)") for e in self.stderr)


def sigint_default() -> None:
    """Run in a started command before exec: the Ctrl-C scenarios' SIGINT must reach it even when this script
    runs as a shell's background job (started with SIGINT ignored; an ignored signal stays ignored across exec,
    and the command, rightly, keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def last_message(stderr: str) -> str:
    """The line that says how a command ended: its last `error:` line, else its last line (progress bars
    redraw with carriage returns, so lines are split on those too)."""
    lines = [x.strip() for x in stderr.replace("\r", "\n").splitlines() if x.strip()]
    errors = [x[x.index("error:") :] for x in lines if "error:" in x]
    return (errors or lines or [""])[-1][:200]


def wait_for(
    predicate: Callable[[], Any],
    proc: subprocess.Popen | None,
    what: str,
    cap: float = WAIT_CAP_S,
    poll: float = 0.05,
):
    """Poll ``predicate`` until truthy (returning it); None when the process ends first or the cap passes."""
    deadline = time.monotonic() + cap
    while time.monotonic() < deadline:
        try:
            found = predicate()
        except Exception:  # the database may be half-made or locked right now: look again
            found = None
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            return None
        time.sleep(poll)
    return None


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def workers(pid: int) -> list[int]:
    """The worker processes of a `--workers K` command: spawned by it, or forked by its fork server."""
    out = []
    for c in children(pid):
        if "spawn_main" in cmdline(c):
            out.append(c)
        elif "forkserver" in cmdline(c):
            out += children(c)
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
