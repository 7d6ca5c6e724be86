"""What every CLI sub-app shares: consoles, the ``--json`` option, JSON output, progress bars.

The CLI is a thin client of the Python API: commands parse options, call the library and print.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Annotated, Any

import orjson
import typer
from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

console = Console()
err_console = Console(stderr=True)

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON for scripts instead of tables for people.")
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        "-s",
        help="Template store: a directory, a .db file or a sqlite:// or postgresql:// URL. "
        "Default: 'kindling templates path' shows it.",
        show_default=False,
    ),
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


def break_path(path: str, width: int) -> str:
    """Return ``path`` with line breaks after ``/`` so each line fits ``width`` where it can.

    Rich folds a long cell at any character, splitting names mid-word; this breaks between path
    components, and inside a component wider than ``width`` (a results file such as
    ``tool-calling-none-0.1_range_0-100.json``) after a ``-``, ``_``, ``.``, ``:`` or space. Only a run
    without any of those that is still wider than ``width`` is left for Rich to fold.
    """
    width = max(width, 8)
    if len(path) <= width:
        return path
    pieces: list[str] = []
    for component in re.findall(r"[^/]*/|[^/]+$", path):  # each component keeps its trailing slash
        if len(component) <= width:
            pieces.append(component)
        else:  # each part keeps the separator it ends with
            pieces.extend(re.findall(r"[^-_.: ]*[-_.: ]|[^-_.: ]+$", component))
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(lines)


def fixed_columns_width(rows: list[list[str]], headers: list[str]) -> int:
    """The width that columns of ``rows`` (each cell on one line) take in a table.

    Counts one space of padding each side and one separator per column, as Rich's boxes draw them.
    """
    total = 0
    for index, header in enumerate(headers):
        widest = max([len(header), *(len(row[index]) for row in rows)])
        total += widest + 3
    return total


def print_records(
    headers: list[str],
    rows: list[list[str]],
    *,
    heading: int = 0,
    title: str | None = None,
    caption: str | None = None,
    right: frozenset[str] = frozenset(),
) -> None:
    """Print ``rows`` as a table when every value fits the terminal on one line, else as one block
    per row (the value of column ``heading`` first, then one label and value a line), so a value is
    never cut with an ellipsis, folded mid-word or dropped off the edge. ``right`` names the columns
    aligned right in the table. Values are printed as text, never as Rich markup."""
    if title:
        console.print(Text(title), highlight=False)
    if fixed_columns_width(rows, headers) < console.width:
        table = Table(box=box.SIMPLE_HEAD)
        for header in headers:
            table.add_column(header, no_wrap=True, justify="right" if header in right else "left")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
    else:
        for row in rows:
            console.print(Text(row[heading], style="bold"))
            fields = Table.grid(padding=(0, 2))
            fields.add_column(no_wrap=True, style="dim")
            fields.add_column(overflow="fold")
            for index, (label, value) in enumerate(zip(headers, row, strict=True)):
                if index != heading:
                    fields.add_row(label, Text(value or "-"))
            console.print(Padding(fields, (0, 0, 0, 2)))
    if caption:
        console.print(Text(caption), highlight=False)
