"""What every CLI sub-app shares: consoles, the ``--json`` option, JSON output, progress bars.

The CLI is a thin client of the Python API: commands parse options, call the library and print.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

console = Console()
err_console = Console(stderr=True)

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON for scripts instead of tables for people.")
]


def print_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout (non-JSON values such as paths become strings)."""
    payload = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str)
    sys.stdout.write(payload.decode("utf-8") + "\n")
    sys.stdout.flush()


def show_progress(json_output: bool = False) -> bool:
    """True when a progress bar should be drawn: stderr is a terminal and output is not JSON."""
    return not json_output and sys.stderr.isatty()


@contextlib.contextmanager
def progress_bar(enabled: bool) -> Iterator[Progress | None]:
    """Yield a Rich progress bar on stderr, or ``None`` when progress should not be drawn."""
    if not enabled:
        yield None
        return
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    with progress:
        yield progress
