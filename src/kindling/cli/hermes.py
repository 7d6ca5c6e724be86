"""``kindling hermes``: enable the kindling plugin in Hermes Agent and see what it will do.

A thin client of ``kindling.integrations.hermes``; the plugin itself runs inside Hermes.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kindling.cli.common import JsonOption, console, print_json

hermes_app = typer.Typer(
    help="The Hermes Agent plugin: warm-up, approvals and tools inside Hermes.", no_args_is_help=True
)


@hermes_app.command("install")
def install_command(
    config: Annotated[
        str | None, typer.Option("--config", help="Hermes's config.yaml (default: $HERMES_HOME/config.yaml).")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Add kindling to plugins.enabled in Hermes's config.yaml, keeping its comments and order."""
    from kindling.integrations.hermes import install

    result = install(config)
    if json_output:
        print_json(result)
        return
    if result["changed"]:
        typer.echo(f"Enabled the kindling plugin in {result['config']}. It loads in Hermes's next session.")
    else:
        typer.echo(f"The kindling plugin is already enabled in {result['config']}.")


@hermes_app.command("status")
def status_command(
    no_daemon: Annotated[
        bool, typer.Option("--no-daemon", help="Do not contact the confirmation daemon.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Show whether Hermes will load the plugin, the settings in force and whether the daemon answers."""
    from kindling.integrations.hermes import status

    data = status(check_daemon=not no_daemon)
    if json_output:
        print_json(data)
        return
    _print_status(data)


def _print_status(data: dict[str, Any]) -> None:
    loaded = "yes" if data["active"] and data["entry_point"] else "no"
    why = ""
    if not data["entry_point"]:
        why = " (kindling is not installed in this Python: install it into Hermes's environment)"
    elif data["disabled"]:
        why = " (listed in plugins.disabled)"
    elif not data["enabled"]:
        why = " (not in plugins.enabled: run `kindling hermes install`)"
    console.print(
        f"Hermes config:   {data['config']}{'' if data['config_exists'] else ' (missing)'}", markup=False
    )
    console.print(f"Plugin loads:    {loaded}{why}", markup=False)
    parts = ", ".join(f"{name} {'on' if on else 'off'}" for name, on in data["parts"].items())
    console.print(f"Parts:           {parts}", markup=False)
    settings = data["settings"]
    console.print(
        f"Warm-up:         template {settings['template']}, budget {settings['budget']}, style {settings['style']}",
        markup=False,
    )
    templates = data.get("templates")
    if templates is not None:
        usable = templates["with_examples"]
        note = "" if usable else " (nothing to warm with: build one with `kindling build NAME SOURCE`)"
        console.print(f"Templates:       {usable} with examples in {templates['store']}{note}", markup=False)
    daemon = data.get("daemon")
    if daemon is not None:
        answer = "answers" if daemon["answers"] else f"does not answer ({daemon.get('error', 'unhealthy')})"
        console.print(f"Daemon:          {daemon['url']} {answer}; token {daemon['token']}", markup=False)
        console.print(
            f"Approvals:       wait {settings['approval_timeout']:g}s, "
            f"{'block' if settings['fail_closed'] else 'allow'} when the daemon cannot be asked",
            markup=False,
        )


def register(app: typer.Typer) -> None:
    """Add the ``hermes`` command group to the root app."""
    app.add_typer(hermes_app, name="hermes")
