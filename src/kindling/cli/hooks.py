"""``kindling hooks``: warm-up and approvals for Claude Code and Codex CLI through their hooks.

A thin client of ``kindling.integrations.agent_hooks``; the agents run ``kindling hooks run``.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from kindling.cli.common import JsonOption, print_json

hooks_app = typer.Typer(
    help="Claude Code and Codex CLI hooks: warm each new session, ask a human before dangerous Bash.",
    no_args_is_help=True,
)

AgentArgument = Annotated[str, typer.Argument(help="The agent: claude-code or codex.", show_default=False)]


@hooks_app.command("install")
def install_command(
    agent: AgentArgument,
    settings: Annotated[
        str | None,
        typer.Option(
            "--settings",
            help="The file to add the hooks to (default: ~/.claude/settings.json or ~/.codex/hooks.json; "
            "a project's .claude/settings.json works too).",
        ),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Add kindling's SessionStart and PreToolUse hooks to the agent's settings, keeping the rest.

    Examples:

      kindling hooks install claude-code

      kindling hooks install codex
    """
    from kindling.integrations.agent_hooks import install_hooks

    result = install_hooks(agent, settings)
    if json_output:
        print_json(result)
        return
    verb = "Added kindling's hooks to" if result["changed"] else "kindling's hooks are already in"
    typer.echo(
        f"{verb} {result['path']}: SessionStart warms each new session, PreToolUse asks before dangerous Bash."
    )
    for note in result["notes"]:
        typer.echo(note)


@hooks_app.command("print")
def print_command(agent: AgentArgument) -> None:
    """Print the hooks kindling would add (JSON for the agent's settings file), changing nothing."""
    from kindling.integrations.agent_hooks import hook_settings_path, hooks_config

    typer.echo(f"# add to {hook_settings_path(agent)}", err=True)
    print_json({"hooks": hooks_config(agent)})


@hooks_app.command("run")
def run_command(
    event: Annotated[str, typer.Argument(help="session-start or pre-tool-use.", show_default=False)],
    agent: Annotated[
        str, typer.Option("--agent", help="The agent calling: claude-code or codex.")
    ] = "claude-code",
) -> None:
    """Answer one hook call: the event's JSON on stdin, the answer on stdout (what the agents run).

    PreToolUse fails closed: a dangerous command that no human approved in time, or a check that
    could not run, is denied (exit code 2).
    """
    from kindling.integrations.agent_hooks import run_hook

    answer, code = run_hook(event, agent, sys.stdin.read())
    sys.stdout.write(json.dumps(answer) + "\n")
    if code:
        reason = answer.get("hookSpecificOutput", {}).get("permissionDecisionReason", "")
        sys.stderr.write(f"{reason}\n")
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add the ``hooks`` command group to the root app."""
    app.add_typer(hooks_app, name="hooks")
