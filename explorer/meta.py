"""What explorer knows about itself: its version, read from the installed package's metadata (a leaf module,
so any stage may ask without importing the package root)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["package_version"]


def package_version() -> str:
    """The installed explorer's version, or ``0.0.0+unknown`` for a source tree that was not installed."""
    try:
        return version("explorer")
    except PackageNotFoundError:
        return "0.0.0+unknown"
