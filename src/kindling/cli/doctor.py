"""``kindling doctor``: check a set-up and say what is wrong and how to fix it.

A thin client of ``kindling.doctor``.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from kindling.cli.common import JsonOption, console, print_json

_MARKS = {"ok": "ok", "warn": "warn", "fail": "FAIL", "skip": "skip"}
_STYLES = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def doctor_command(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="The confirm daemon's database (default: KINDLING_CONFIRM_DB or $KINDLING_HOME/confirm.db).",
        ),
    ] = None,
    confirm_url: Annotated[
        str | None, typer.Option("--confirm-url", help="The daemon's URL (default: KINDLING_CONFIRM_URL).")
    ] = None,
    upstream: Annotated[
        str | None, typer.Option("--upstream", help="The proxy's upstream base URL, to check it answers.")
    ] = None,
    proxy_url: Annotated[
        str | None,
        typer.Option(
            "--proxy-url",
            help="A running proxy's address, to check it and what it reaches (default: KINDLING_PROXY_URL; "
            "else 127.0.0.1:6100 when a proxy has recorded here).",
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each HTTP answer.")] = 3.0,
    json_output: JsonOption = False,
) -> None:
    """Check this set-up and say what is wrong and how to fix it; exit 1 when something is.

    Checks $KINDLING_HOME, the clock, the confirm database's schema, the daemon and the role of each
    token set (KINDLING_CONFIRM_TOKEN: agent, KINDLING_CONFIRM_APPROVER_TOKEN: approver), the Hermes
    plugin, templates for warm-up and for the tools recent sessions and the proxy's conversations use, a
    running proxy with its store and upstream, or the upstream named.
    Example: kindling doctor --proxy-url http://127.0.0.1:6100
    """
    from kindling.doctor import DoctorOptions, as_json, diagnose, healthy

    options = DoctorOptions.from_env(
        confirm_db=db, confirm_url=confirm_url, upstream=upstream, proxy_url=proxy_url, timeout=timeout
    )
    checks = diagnose(options)
    if json_output:
        print_json(as_json(checks))
    else:
        table = Table("", "check", "finding", "fix", show_lines=False)
        for check in checks:
            mark = _MARKS[check.status]
            table.add_row(
                Text(mark, style=_STYLES[check.status]), Text(check.name), Text(check.detail), Text(check.fix)
            )
        console.print(table)
        failed = sum(check.status == "fail" for check in checks)
        console.print("All good." if not failed else f"{failed} problem(s) found.", markup=False)
    if not healthy(checks):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``kindling doctor`` to the main app."""
    app.command("doctor")(doctor_command)
