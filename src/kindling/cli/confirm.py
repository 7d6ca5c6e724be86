"""``kindling confirm``: run the confirmation daemon and manage its tokens, whitelist and audit log.

A thin client of ``kindling.confirm``: every command opens the daemon's database (``--db``, else
``KINDLING_CONFIRM_DB``, else ``$KINDLING_HOME/confirm.db``) and calls the store.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any

import orjson
import typer
from rich.table import Table
from rich.text import Text

from kindling.cli.common import JsonOption, console, err_console, print_json

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLite path or sqlite:// / postgresql:// URL (default: KINDLING_CONFIRM_DB or $KINDLING_HOME/confirm.db).",
    ),
]

confirm_app = typer.Typer(
    help="The confirmation daemon: an agent asks, a human approves or denies.", no_args_is_help=True
)
token_app = typer.Typer(help="Bearer tokens (roles: agent, approver, admin).", no_args_is_help=True)
whitelist_app = typer.Typer(
    help="Auto-approval rules (never applied to high-risk actions).", no_args_is_help=True
)
audit_app = typer.Typer(help="The append-only, hash-chained audit log.", no_args_is_help=True)
confirm_app.add_typer(token_app, name="token")
confirm_app.add_typer(whitelist_app, name="whitelist")
confirm_app.add_typer(audit_app, name="audit")


def _when(value: float | None) -> str:
    if value is None:
        return ""
    return datetime.fromtimestamp(value, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _store(db: str | None) -> Any:
    from kindling.confirm.settings import ConfirmSettings
    from kindling.confirm.store import open_store

    return open_store(ConfirmSettings.from_env(db=db))


@confirm_app.command("serve")
def serve_command(
    host: Annotated[str | None, typer.Option(help="Address to listen on (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default 6000).")] = None,
    db: DbOption = None,
    public_url: Annotated[
        str | None, typer.Option("--public-url", help="URL people reach the daemon at, for links.")
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Run the daemon in the foreground.

    On a first start with no tokens it creates an admin token and prints it once, with the
    sign-in URL of the web page. Example: kindling confirm serve --port 6000
    """
    from kindling.confirm.server import serve
    from kindling.confirm.settings import ConfirmSettings
    from kindling.confirm.store import ConfirmationStore

    settings = ConfirmSettings.from_env(host=host, port=port, db=db, public_url=public_url)
    store = ConfirmationStore(settings.database, settings)
    try:
        raw = store.bootstrap_admin()
    finally:
        store.close()
    if raw:
        err_console.print("No tokens yet: created an admin token. It is shown only this once:", markup=False)
        typer.echo(raw)
        err_console.print(
            f"Sign in at {settings.base_url}/ui/login#token={raw}", markup=False, soft_wrap=True
        )
    serve(settings, log_level=log_level)


@confirm_app.command("path")
def path_command(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Print where the daemon keeps its state (a path, or a URL with the password hidden)."""
    from kindling.confirm.settings import ConfirmSettings
    from kindling.db import redact_url

    database = redact_url(ConfirmSettings.from_env(db=db).database)
    if json_output:
        print_json({"database": database})
        return
    typer.echo(database)


@confirm_app.command("status")
def status_command(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Show request counts by status, live tokens, whitelist rules, the outbox and audit size."""
    summary = _store(db).summary()
    if json_output:
        print_json(summary)
        return
    table = Table("what", "count", title=f"kindling confirm ({summary['database']})")
    for status, n in summary["requests"].items():
        table.add_row(f"requests {status}", str(n))
    table.add_row("live tokens", str(summary["tokens"]))
    table.add_row("whitelist rules", str(summary["whitelist_rules"]))
    for status, n in summary["outbox"].items():
        table.add_row(f"notifications {status}", str(n))
    table.add_row("audit events", str(summary["audit_events"]))
    console.print(table)


@token_app.command("create")
def token_create(
    role: Annotated[str, typer.Option("--role", help="agent (submit), approver (decide) or admin.")],
    name: Annotated[str, typer.Option("--name", help="A unique name, e.g. the person or agent.")],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Create a token and print it once (only its hash is stored).

    Example: kindling confirm token create --role approver --name alice
    """
    info, raw = _store(db).create_token(role, name)
    if json_output:
        print_json({**info.__dict__, "token": raw})
        return
    err_console.print(f"Created {info.role} token {info.name!r}; it is shown only this once:", markup=False)
    typer.echo(raw)


@token_app.command("list")
def token_list(db: DbOption = None, json_output: JsonOption = False) -> None:
    """List tokens (names and roles, never secrets)."""
    tokens = _store(db).list_tokens()
    if json_output:
        print_json([t.__dict__ for t in tokens])
        return
    table = Table("name", "role", "id", "created", "revoked")
    for t in tokens:
        table.add_row(t.name, t.role, t.id, _when(t.created_at), _when(t.revoked_at))
    console.print(table)


@token_app.command("revoke")
def token_revoke(name: Annotated[str, typer.Argument(help="The token's name.")], db: DbOption = None) -> None:
    """Revoke a token by name; it stops working at once on every daemon sharing the database."""
    info = _store(db).revoke_token(name)
    typer.echo(f"Revoked {info.role} token {info.name!r}.")


@whitelist_app.command("add")
def whitelist_add(
    action: Annotated[str, typer.Argument(help="An action name or glob, e.g. read_* .")],
    session: Annotated[str | None, typer.Option("--session", help="Only for this session key.")] = None,
    db: DbOption = None,
) -> None:
    """Auto-approve an action, globally or in one session (high-risk actions are refused)."""
    rule = _store(db).add_rule(action, session)
    where = f"session {rule.session_key}" if rule.session_key else "every session"
    typer.echo(f"Rule {rule.id}: auto-approve {rule.action!r} in {where}.")


@whitelist_app.command("list")
def whitelist_list(db: DbOption = None, json_output: JsonOption = False) -> None:
    """List auto-approval rules."""
    rules = _store(db).list_rules()
    if json_output:
        print_json([r.__dict__ for r in rules])
        return
    table = Table("id", "action", "session", "by", "created")
    for r in rules:
        table.add_row(str(r.id), r.action, r.session_key or "(all)", r.created_by, _when(r.created_at))
    console.print(table)


@whitelist_app.command("remove")
def whitelist_remove(
    rule_id: Annotated[int, typer.Argument(help="The rule's id.")], db: DbOption = None
) -> None:
    """Remove an auto-approval rule."""
    _store(db).remove_rule(rule_id)
    typer.echo(f"Removed rule {rule_id}.")


@audit_app.command("verify")
def audit_verify(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Check the audit hash chain end to end; exit 1 when a row was altered, removed or inserted."""
    report = _store(db).verify_audit()
    if json_output:
        print_json(report.__dict__)
    elif report.ok:
        typer.echo(f"Audit chain intact: {report.rows} events.")
    else:
        err_console.print(f"Audit chain BROKEN at event {report.bad_seq}: {report.problem}.", markup=False)
    if not report.ok:
        raise typer.Exit(1)


@audit_app.command("list")
def audit_list(
    limit: Annotated[int, typer.Option(min=1, max=10000, help="How many events, newest first.")] = 50,
    request: Annotated[str | None, typer.Option("--request", help="Only this request's events.")] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show the newest audit events."""
    events = _store(db).audit_events(limit=limit, request_id=request)
    if json_output:
        print_json([e.__dict__ for e in events])
        return
    table = Table("seq", "when", "event", "request", "actor", "data")
    for e in events:
        table.add_row(
            str(e.seq), _when(e.at), e.event, e.request_id or "", e.actor or "", Text(_audit_data(e.data))
        )
    console.print(table)


def _audit_data(data: Any) -> str:
    """An event's data as ``key=value`` pairs (JSON values, text as it is), not a Python dict repr."""
    if not isinstance(data, dict):
        return orjson.dumps(data, default=str).decode()
    pairs = []
    for key, value in data.items():
        shown = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        pairs.append(f"{key}={shown}")
    return " ".join(pairs)


def register(app: typer.Typer) -> None:
    """Add the ``confirm`` command group to the root app."""
    app.add_typer(confirm_app, name="confirm")
