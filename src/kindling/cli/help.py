"""``--help`` for every kindling command: Rich panels that stay readable at 80 columns.

Typer's own Rich help gives each option five columns (long name, short name, the ``--no-`` form, its
short name, a ``<type>`` column that says ``<bool>`` even for a flag), which leaves about 22 columns
of an 80-column terminal for the descriptions. Here an option is one cell (``-b, --budget INTEGER``,
``--record / --no-record``), a flag shows no type, and the descriptions get the rest of the width.
``main.py`` gives these classes to every command and group.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

# Typer's type label ("<str>", "<int range>", "<list[path]>") -> the word shown after an option.
_TYPE_WORDS = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "FLOAT",
    "bool": "BOOLEAN",
    "file": "PATH",
    "dir": "PATH",
}
_NAME_STYLE = "bold cyan"
_NEGATIVE_STYLE = "bold magenta"
_VALUE_STYLE = "yellow"


def _metavar(param: Any, ctx: Any) -> str:
    """The word after an option or the name of an argument: its own metavar, else its type."""
    if param.metavar:
        return str(param.metavar)
    if isinstance(param, TyperArgument):
        return str(param.name or "").upper()
    label = str(param.display_type(ctx)).strip("<>")
    if label.startswith("list[") and label.endswith("]"):  # a repeatable option: one value each time
        label = label[5:-1]
    label = label.removesuffix(" range")
    if "|" in label:
        return f"[{label}]"
    return _TYPE_WORDS.get(label, label.upper())


def _option_cell(param: TyperOption, ctx: Any) -> list[Text]:
    """The option's names and value word, as one or two lines (the ``--no-`` form may go on its own)."""
    shorts = [o for o in param.opts if not o.startswith("--")]
    longs = [o for o in param.opts if o.startswith("--")]
    first = Text(", ".join([*shorts, *longs]), style=_NAME_STYLE)
    if not param.is_flag and not param.count:
        first.append(" " + _metavar(param, ctx), style=_VALUE_STYLE)
    if not param.secondary_opts:
        return [first]
    second = Text(", ".join(param.secondary_opts), style=_NEGATIVE_STYLE)
    return [first, second]


def _argument_cell(param: TyperArgument, ctx: Any) -> list[Text]:
    name = _metavar(param, ctx) + ("..." if param.nargs == -1 else "")
    return [Text(name, style=_NAME_STYLE)]


def _param_help(param: Any, ctx: Any) -> Text:
    record = param.get_help_record(ctx)
    return Text(" ".join((record[1] if record else "").split()))


def _rows_table(rows: list[tuple[list[Text], Text]], width: int) -> Table:
    """A two-column grid: names on the left as narrow as they allow, descriptions in the rest."""
    inner = max(width - 4, 20)  # the panel's borders and padding
    cap = max(14, inner * 2 // 5)
    joined = [Text(" / ").join(cell) for cell, _ in rows]
    widest = max((len(line.plain) for line in joined if len(line.plain) <= cap), default=0)
    pieces = max(len(line.plain) for cell, _ in rows for line in cell)
    names_width = min(max(widest, min(pieces, cap)), cap)
    table = Table.grid(padding=(0, 2), expand=True)
    table.add_column(width=names_width, overflow="fold")
    table.add_column(ratio=1, overflow="fold")
    for (cell, description), line in zip(rows, joined, strict=True):
        # "--record / --no-record" on one line when it fits, else the --no- form on a line of its own.
        name = line if len(line.plain) <= names_width else Text("\n").join(cell)
        table.add_row(name, description)
    return table


def _panel(title: str, body: RenderableType) -> Panel:
    return Panel(body, title=title, title_align="left", border_style="dim", box=box.ROUNDED)


def _usage(command: Any, ctx: Any) -> Text:
    text = Text("Usage: ", style="yellow")
    text.append(ctx.command_path, style="bold")
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    if any(isinstance(p, TyperOption) for p in params):
        text.append(" [OPTIONS]")
    for param in params:
        if isinstance(param, TyperArgument):
            name = _metavar(param, ctx) + ("..." if param.nargs == -1 else "")
            text.append(f" {name}" if param.required else f" [{name}]")
    if isinstance(command, TyperGroup):
        # A group that does something on its own (``kindling templates`` lists) takes an optional command.
        text.append(" [COMMAND [ARGS]...]" if command.invoke_without_command else " COMMAND [ARGS]...")
    return text


def _description(command: Any) -> Iterable[RenderableType]:
    help_text = inspect.cleandoc(command.help or "").partition("\f")[0].strip()
    if command.deprecated:
        yield Text("(deprecated)", style="red")
    if help_text:
        yield Markdown(help_text)


def _command_rows(group: TyperGroup, ctx: Any) -> list[tuple[list[Text], Text]]:
    rows = []
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        first = inspect.cleandoc(sub.short_help or sub.help or "").partition("\f")[0].split("\n\n")[0]
        rows.append(([Text(name, style=_NAME_STYLE)], Text(" ".join(first.split()))))
    return rows


def render_help(command: Any, ctx: Any, console: Console | None = None) -> None:
    """Print ``command``'s help: usage, description, then its arguments, options and sub-commands."""
    console = console or Console(highlight=False)
    console.print(Padding(_usage(command, ctx), (1, 1, 1, 1)))
    description = list(_description(command))
    if description:
        console.print(Padding(Group(*description), (0, 1, 1, 1)))
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    arguments = [
        (_argument_cell(p, ctx), _param_help(p, ctx)) for p in params if isinstance(p, TyperArgument)
    ]
    options = [(_option_cell(p, ctx), _param_help(p, ctx)) for p in params if isinstance(p, TyperOption)]
    for title, rows in (("Arguments", arguments), ("Options", options)):
        if rows:
            console.print(_panel(title, _rows_table(rows, console.width)))
    if isinstance(command, TyperGroup):
        commands = _command_rows(command, ctx)
        if commands:
            console.print(_panel("Commands", _rows_table(commands, console.width)))


class KindlingCommand(TyperCommand):
    """A Typer command whose ``--help`` is :func:`render_help`."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        render_help(self, ctx)


class KindlingHelpGroup(TyperGroup):
    """A Typer group whose ``--help`` (and bare invocation) is :func:`render_help`."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        render_help(self, ctx)
