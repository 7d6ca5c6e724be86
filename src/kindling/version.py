"""kindling's version, read from the installed distribution (a leaf: nothing here imports the package top)."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version


@functools.cache
def kindling_version() -> str:
    """Return the installed kindling's version, or ``0+unknown`` when it runs from a source tree
    that was never installed."""
    try:
        return version("kindling-agent")
    except PackageNotFoundError:
        return "0+unknown"
