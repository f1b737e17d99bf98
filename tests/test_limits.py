"""The limits of explorer.limits: one error naming the value, the limit and the override; overrides read
from the environment each time; files sized before they are read; memory as the machine has it."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from explorer.errors import LimitError
from explorer.limits import (
    D_MODEL,
    FILE_MB,
    LIMITS,
    MEMORY_MB,
    WORKERS,
    available_memory,
    check_file_size,
    check_memory,
    usable_cpus,
)


def test_a_value_above_its_limit_names_the_value_the_limit_and_the_override():
    assert D_MODEL.check(65_536, "--d-model") == 65_536
    with pytest.raises(LimitError) as err:
        D_MODEL.check(10**9, "--d-model", "give a narrower width")
    assert str(err.value) == (
        "--d-model is 1,000,000,000, above the limit of 65,536 (wider than any model explorer builds); give a "
        "narrower width, or set EXPLORER_MAX_D_MODEL=1000000000 if you mean it."
    )
    with pytest.raises(LimitError, match="is inf; give a finite number"):
        D_MODEL.check(float("inf"), "--d-model")


def test_the_override_is_read_each_time_and_a_malformed_one_is_refused(monkeypatch):
    monkeypatch.setenv("EXPLORER_MAX_D_MODEL", "1_000_000")
    assert D_MODEL.check(500_000, "--d-model") == 500_000
    for bad in ("lots", "-1", "0", "²"):
        monkeypatch.setenv("EXPLORER_MAX_D_MODEL", bad)
        with pytest.raises(LimitError, match="EXPLORER_MAX_D_MODEL=.* is not a whole number >= 1"):
            D_MODEL.value()
    monkeypatch.delenv("EXPLORER_MAX_D_MODEL")
    assert D_MODEL.value() == 65_536


def test_every_limit_has_its_own_variable_and_a_positive_default():
    assert len({limit.env for limit in LIMITS}) == len(LIMITS)
    assert all(limit.value() >= 1 for limit in LIMITS)
    assert WORKERS.value() == 4 * usable_cpus()


def test_files_are_sized_before_they_are_read(tmp_path, monkeypatch):
    small = tmp_path / "spec.toml"
    small.write_text("x" * 100)
    assert check_file_size(small, "spec") == 100
    big = tmp_path / "big.toml"
    big.write_bytes(b"x" * (FILE_MB.value() * 10**6 + 1))
    with pytest.raises(LimitError, match="above the 1.0 MB explorer reads whole.*EXPLORER_MAX_FILE_MB=2"):
        check_file_size(big, "spec")
    monkeypatch.setenv("EXPLORER_MAX_FILE_MB", "2")
    assert check_file_size(big, "spec") > 10**6
    with pytest.raises(LimitError, match="'/dev/zero' is not a regular file"):
        check_file_size("/dev/zero", "spec")
    assert check_file_size(tmp_path / "missing", "spec") == 0  # the reader names a missing file itself


def test_memory_is_what_the_machine_has_or_the_override(monkeypatch):
    have = available_memory()
    assert 0 < have
    assert check_memory(have // 2, "a model", "shrink it") == have // 2
    with pytest.raises(
        LimitError, match="a model needs about .* of memory is available here; shrink it, or set"
    ):
        check_memory(10 * have + 10**9, "a model", "shrink it")
    monkeypatch.setenv(MEMORY_MB.env, "10")
    with pytest.raises(LimitError, match=r"needs about 20.0 MB, but 10.0 MB .*EXPLORER_MAX_MEMORY_MB=20 "):
        check_memory(20 * 10**6, "a model", "shrink it")


def test_the_address_space_limit_counts_as_memory():
    """Under RLIMIT_AS (a container, ulimit -v, the battery's watchdog) the room left is what a command has."""
    code = (
        "import resource; from explorer.limits import available_memory; "
        "soft = 3 * 2**30; resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1])); "
        "print(available_memory())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert 0 < int(out) < 3 * 2**30
    assert resource.getrlimit(resource.RLIMIT_AS)  # this process's own limit is untouched
