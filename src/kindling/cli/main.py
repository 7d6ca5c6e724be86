"""The ``kindling`` command: one Typer sub-app per capability, wired together here."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from kindling.cli import confirm, cron, doctor, hermes, hooks, mcp, proxy, review, sessions, stats, templates
from kindling.cli import eval as eval_cli
from kindling.cli.common import err_console
from kindling.cli.help import KindlingCommand, KindlingHelpGroup
from kindling.config import raise_errors
from kindling.errors import KindlingError
from kindling.version import kindling_version


def _usage_error_line(exc: Any, command: Any, args: Sequence[str]) -> str:
    """One line for a command-line mistake: the message and where to read the right usage.

    Some parser errors carry no context; then the command path comes from the words typed.
    """
    message = " ".join(str(exc.format_message()).split())
    context = getattr(exc, "ctx", None)
    if context is not None:
        path = context.command_path
    else:
        words = ["kindling"]
        for word in args:
            command = getattr(command, "commands", {}).get(word)
            if command is None:
                break
            words.append(word)
        path = " ".join(words)
    return f"Error: {message} (see '{path} --help')"


class KindlingGroup(KindlingHelpGroup):
    """Turns every error into one clear line on stderr and its exit code, never a traceback.

    A KindlingError exits with its own code; a usage mistake (unknown option, missing argument)
    exits with 2, as Click's do, but in one line instead of a usage block and a boxed message.
    ``KINDLING_RAISE_ERRORS=1`` re-raises KindlingErrors instead, for debugging.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        extra["windows_expand_args"] = windows_expand_args
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            # Non-standalone: Click raises usage errors to us instead of printing them its way.
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:  # Typer's own Click: usage errors and friends
            if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group name: show its help, as before
                # Building the error rendered the help already (Rich prints it and leaves the
                # message empty); plain Click leaves it in the message. Print it once either way.
                if exc.message:
                    typer.echo(exc.message)
                sys.exit(0)
            typed = list(args) if args is not None else sys.argv[1:]
            err_console.print(
                _usage_error_line(exc, self, typed), markup=False, highlight=False, soft_wrap=True
            )
            sys.exit(getattr(exc, "exit_code", 2))
        except typer.Abort:
            err_console.print("Aborted.", markup=False, highlight=False)
            sys.exit(1)
        # A command that ran to its end returns None; one that raised typer.Exit returns its code.
        sys.exit(result if isinstance(result, int) else 0)

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
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kindling {kindling_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Mine past agent sessions, warm new ones, review turns, confirm risky actions, run jobs.

    Set KINDLING_HOME (default ~/.kindling) and HERMES_HOME (default ~/.hermes) to move state.
    """


def _use_kindling_help(typer_app: typer.Typer) -> None:
    """Give every command and group under ``typer_app`` kindling's ``--help`` (see cli/help.py),
    unless it names a class of its own."""
    for command in typer_app.registered_commands:
        if command.cls in (None, TyperCommand):  # Typer fills in its own class when none is named
            command.cls = KindlingCommand
    for group in typer_app.registered_groups:
        sub = group.typer_instance
        if sub is None:
            continue
        if not isinstance(sub.info.cls, type) or sub.info.cls is TyperGroup:
            sub.info.cls = KindlingHelpGroup
        _use_kindling_help(sub)


for _module in (
    sessions,
    stats,
    templates,
    eval_cli,
    review,
    confirm,
    cron,
    hermes,
    hooks,
    proxy,
    mcp,
    doctor,
):
    _module.register(app)
_use_kindling_help(app)


def main() -> None:
    """Entry point of the ``kindling`` console script and ``python -m kindling``."""
    app()
