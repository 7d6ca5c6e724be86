"""The ``kindling`` command: one Typer sub-app per capability, wired together here."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kindling import __version__
from kindling.cli import confirm, cron, review, sessions, stats, templates
from kindling.cli.common import err_console
from kindling.config import raise_errors
from kindling.errors import KindlingError


class KindlingGroup(TyperGroup):
    """Turns a KindlingError into one clear line on stderr and its exit code, never a traceback.

    ``KINDLING_RAISE_ERRORS=1`` re-raises instead, for debugging.
    """

    def invoke(self, ctx: Any) -> Any:  # typer vendors its own click Context
        try:
            return super().invoke(ctx)
        except KindlingError as exc:
            if raise_errors():
                raise
            err_console.print(f"Error: {exc}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from exc


app = typer.Typer(
    name="kindling",
    cls=KindlingGroup,
    help="Experience from turn zero for tool-calling LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kindling {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Mine past agent sessions, warm new ones, review turns, confirm risky actions, run jobs.

    Set KINDLING_HOME (default ~/.kindling) and HERMES_HOME (default ~/.hermes) to move state.
    """


for _module in (sessions, stats, templates, review, confirm, cron):
    _module.register(app)


def main() -> None:
    """Entry point of the ``kindling`` console script and ``python -m kindling``."""
    app()
