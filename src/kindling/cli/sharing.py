"""``kindling templates share`` and ``kindling templates show --provenance``: where a template's
experience came from, and sharing it with every tenant of the proxy.

A thin client of :mod:`kindling.templates.provenance`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from kindling.cli.common import JsonOption, StoreOption, console, print_json

if TYPE_CHECKING:
    from kindling.templates.model import Template


def print_provenance(template: Template) -> None:
    """Print where each example and past task of ``template`` came from, after a one-line summary."""
    from kindling.templates.provenance import provenance_rows, provenance_summary

    summary = provenance_summary(template)
    console.print(
        f"{summary['examples']} examples and {summary['past_tasks']} past tasks from {summary['sessions']} sessions; "
        f"tenants {_counts(summary['by_tenant'])}; sources {_counts(summary['by_source'])}; "
        f"verified {_counts(summary['verified'])}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    table = Table(title="provenance", title_justify="left")
    for column in ("kind", "tool", "request", "source", "session", "tenant", "verified"):
        table.add_column(column, overflow="fold")
    for row in provenance_rows(template):
        table.add_row(
            row["kind"],
            row["tool"],
            row["request"],
            row["source"] or "-",
            row["session"] or "-",
            row["tenant"] or "-",
            "unknown" if row["verified"] is None else ("yes" if row["verified"] else "no"),
        )
    console.print(table)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "none"


def register(templates_app: typer.Typer) -> None:
    """Add ``share`` to the ``templates`` group."""

    @templates_app.command("share")
    def share_command(
        name: Annotated[str, typer.Argument(help="Template name.")],
        yes: Annotated[
            bool, typer.Option("--yes", "-y", help="Share without asking (after printing what).")
        ] = False,
        unshare: Annotated[
            bool, typer.Option("--unshare", help="Stop sharing it: only its own tenant warms from it again.")
        ] = False,
        store: StoreOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Let every tenant of the proxy warm from a template, after showing what it would share.

        Shows the template's owner, how many examples and past tasks it holds, from which tenants,
        sessions and sources, how many are verified, and the first requests it answers; then asks.
        A rebuild that changes a shared template saves it unshared until it is shared again.

        Examples:

            kindling templates share proxy-alice

            kindling templates share common --yes --json

            kindling templates share proxy-alice --unshare
        """
        from kindling.errors import ConfigError
        from kindling.templates.provenance import share_preview, share_template
        from kindling.templates.store import open_store

        opened = open_store(store)
        preview = share_preview(opened.get(name))
        if unshare:
            stored = share_template(opened, name, shared=False)
            if json_output:
                print_json({"shared": False, "template": share_preview(stored)})
            else:
                console.print(f"Template {name} v{stored.version} is no longer shared.", markup=False)
            return
        if not json_output:
            console.print(
                f"Sharing template {name} v{preview['version']} (tenant {preview['owner']}) gives every tenant's "
                f"warm-ups {preview['examples']} examples and {preview['past_tasks']} past tasks from "
                f"{preview['sessions']} sessions.\n"
                f"  tenants: {_counts(preview['by_tenant'])}\n"
                f"  sources: {_counts(preview['by_source'])}\n"
                f"  verified: {_counts(preview['verified'])}\n"
                f"  tools: {', '.join(preview['tools']) or 'none'}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            for request in preview["sample_requests"]:
                console.print(f"  > {request}", markup=False, highlight=False, soft_wrap=True)
        if preview["shared"]:
            if json_output:
                print_json({"shared": True, "template": preview})
            else:
                console.print("It is shared already.")
            return
        if not yes:
            if json_output:
                raise ConfigError(f"Sharing {name!r} needs --yes with --json (nothing was shared).")
            typer.confirm("Share it with every tenant?", abort=True)
        stored = share_template(opened, name)
        if json_output:
            print_json({"shared": True, "template": share_preview(stored)})
        else:
            console.print(f"Shared template {name} as v{stored.version}.", markup=False)
