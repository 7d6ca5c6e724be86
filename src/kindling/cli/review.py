"""CLI for this capability (not built yet)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this capability's commands to the root app."""
