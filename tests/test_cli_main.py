"""The root ``kindling`` command: version, completion, usage errors and help at 80 columns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
import typer.completion
from typer.testing import CliRunner

from kindling import __version__
from kindling.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flag(flag: str) -> None:
    result = runner.invoke(app, [flag])
    assert result.exit_code == 0 and result.stdout.strip() == f"kindling {__version__}"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["stats", "--nope"], "No such option: --nope"),
        (["cron", "add"], "Missing argument 'schedule'"),
        (["nosuch"], "No such command 'nosuch'"),
        (["cron", "add", "every 1h", "--name", "x", "--repeat", "0"], "--repeat"),
        (["warm", "--budget", "many"], "--budget"),
        (["stats", "--plot"], "'kindling stats --help'"),  # a parser error without a context
        (["cron", "list", "--db"], "'kindling cron list --help'"),
    ],
)
def test_usage_errors_are_one_error_line(args: list[str], fragment: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and fragment in lines[0]
    assert "--help" in lines[0]  # says where the right usage is
    assert "Usage:" not in result.output and "╭" not in result.output


def test_a_bare_group_still_shows_its_help() -> None:
    for group in (["cron"], ["confirm", "token"], []):
        result = runner.invoke(app, group)
        assert result.exit_code == 0 and "Error" not in result.output, group
        # Once: Rich renders the help while the error is built, so printing it again doubled it.
        assert result.output.count(f"Usage: {' '.join(['kindling', *group])} ") == 1, group


def test_shell_completion_is_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    help_text = runner.invoke(app, ["--help"], env={"COLUMNS": "120"}).output
    assert "--install-completion" in help_text and "--show-completion" in help_text
    # Typer names the shell from the processes above this one: under `make` started from sh (a CI
    # script, a cron job) that is sh, which it has no script for. The test is about kindling, so
    # the shell is bash whatever started the suite.
    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    result = runner.invoke(app, ["--show-completion"])
    assert result.exit_code == 0 and "_KINDLING_COMPLETE" in result.output


def _command_paths(command: Any, path: list[str]) -> Iterator[list[str]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _command_paths(sub, [*path, name])


def test_every_help_is_readable_at_80_columns() -> None:
    """Rich cuts a word wider than its cell with an ellipsis: variable names and paths were cut."""
    paths = list(_command_paths(typer.main.get_command(app), []))
    assert len(paths) > 30  # the walk reaches the sub-commands
    cut = {}
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        assert max(len(line) for line in result.output.splitlines()) <= 80, path
        lines = [line for line in result.output.splitlines() if "…" in line]
        if lines:
            cut[" ".join(path) or "kindling"] = lines
    assert not cut, cut
