"""``--help`` of every command at 80 columns: descriptions get the width, flags show no type."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer
from typer.core import TyperOption
from typer.testing import CliRunner

from kindling.cli.main import app

runner = CliRunner()


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, [*path, name])


def _option_rows(text: str) -> list[str]:
    """The rows of the Options panel that name an option (its first line)."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("╭─ Options"):
            inside = True
        elif line.startswith("╰"):
            inside = False
        elif inside and re.match(r"│ -", line):
            rows.append(line)
    return rows


def test_descriptions_get_most_of_80_columns_and_flags_show_no_type() -> None:
    commands = list(_commands(typer.main.get_command(app), []))
    assert len(commands) > 30
    for path, command in commands:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        text = result.output
        assert max(len(line) for line in text.splitlines()) <= 80, path
        # No Typer type labels: "<bool>" after a flag, "<str>", "<int range>", "{name}" in the usage.
        assert not re.search(r"<(bool|str|int|float|path|list)[^>]*>", text), (path, text)
        assert "Usage: kindling" in text and "{" not in text.splitlines()[1], path
        for row in _option_rows(text):
            # The description starts by column 36: at least 42 of the 80 columns are for words.
            names = re.match(r"│ (\S+(?: \S+)*)( {2,})\S", row)
            assert names is not None and names.end(2) <= 36, (path, row)
        for param in command.params:
            if isinstance(param, TyperOption) and param.is_flag and not param.secondary_opts:
                longest = max(param.opts, key=len)
                line = next(r for r in _option_rows(text) if longest in r)
                # The flag's names are followed by its description, no value word.
                assert re.search(re.escape(longest) + r" {2,}\S", line), (path, line)


def test_the_three_busiest_helps_read_in_long_lines() -> None:
    """``warm``, ``build`` and ``cron add`` left about 22 columns for each description."""
    for path in (["warm"], ["build"], ["cron", "add"]):
        text = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}).output
        # The 52-character description of --json takes at most two lines (it took three or four).
        lines = text.splitlines()
        at = next(i for i, line in enumerate(lines) if re.match(r"│ --json ", line))
        assert "people." in lines[at] + lines[at + 1], (path, lines[at : at + 4])
    warm = runner.invoke(app, ["warm", "--help"], env={"COLUMNS": "80"}).output
    assert "-b, --budget INTEGER" in warm and "--record / --no-record" in warm
