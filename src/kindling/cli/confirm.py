"""``kindling confirm``: run the confirmation daemon and manage its tokens, whitelist and audit log.

A thin client of ``kindling.confirm``: the management commands open the daemon's database
(``--db``, else ``KINDLING_CONFIRM_DB``, else ``$KINDLING_HOME/confirm.db``) and call the store;
read-only ones never create it. ``pending``, ``approve`` and ``deny`` talk to a running daemon over
HTTP with an approver token (``KINDLING_CONFIRM_APPROVER_TOKEN``), as the web page does.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from typing import Annotated, Any

import orjson
import typer
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from kindling.cli.common import JsonOption, console, err_console, print_json, print_records

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


def _existing_store(db: str | None) -> Any:
    """The store, or None when its SQLite file does not exist yet (read-only commands create nothing)."""
    from kindling.confirm.settings import ConfirmSettings
    from kindling.confirm.store import open_existing_store

    return open_existing_store(ConfirmSettings.from_env(db=db))


def _no_database(db: str | None) -> None:
    from kindling.confirm.settings import ConfirmSettings

    where = ConfirmSettings.from_env(db=db).database
    err_console.print(
        f"No confirm database yet at {where} (kindling confirm serve or token create makes it).",
        markup=False,
        soft_wrap=True,
    )


@confirm_app.command("serve")
def serve_command(
    host: Annotated[str | None, typer.Option(help="Address to listen on (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (default 6000).")] = None,
    db: DbOption = None,
    public_url: Annotated[
        str | None, typer.Option("--public-url", help="URL people reach the daemon at, for links.")
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    log_format: Annotated[
        str, typer.Option("--log-format", help="human (default) or json: one JSON object a line on stderr.")
    ] = "human",
    metrics: Annotated[
        bool | None,
        typer.Option(
            "--metrics/--no-metrics",
            help="Answer Prometheus /metrics and count for it (default on; KINDLING_CONFIRM_METRICS).",
        ),
    ] = None,
) -> None:
    """Run the daemon in the foreground.

    On a first start with no tokens it creates an admin token and prints it once, with the
    sign-in URL of the web page. It answers /health, /ready and /metrics (see docs/operations.md).
    Example: kindling confirm serve --port 6000 --log-format json
    """
    from kindling.confirm.server import serve
    from kindling.confirm.settings import ConfirmSettings
    from kindling.confirm.store import ConfirmationStore
    from kindling.observe.logs import LOG_FORMATS

    if log_format not in LOG_FORMATS:
        raise typer.BadParameter(f"use {' or '.join(LOG_FORMATS)}", param_hint="--log-format")
    settings = ConfirmSettings.from_env(host=host, port=port, db=db, public_url=public_url, metrics=metrics)
    store = ConfirmationStore(settings.database, settings)
    try:
        raw = store.bootstrap_admin()
    finally:
        store.close()
    if raw:
        # The token goes to stdout once and nowhere else: stderr often ends up in a shared log.
        first = "No tokens yet: created an admin token, printed once on stdout below."
        then = (
            f"Sign in at {settings.base_url}/ui/login with it (or open "
            f"{settings.base_url}/ui/login#token=<token>)."
        )
        if log_format == "json":  # stderr stays one JSON object a line
            import logging

            from kindling.confirm.server import log_to_stderr

            log_to_stderr(log_level, log_format)
            logging.getLogger("kindling.confirm").warning(first)
            typer.echo(raw)
            logging.getLogger("kindling.confirm").warning(then)
        else:
            err_console.print(first, markup=False)
            typer.echo(raw)
            err_console.print(then, markup=False, soft_wrap=True)
    serve(settings, log_level=log_level, log_format=log_format)


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
    from kindling.confirm.store import STATUSES

    store = _existing_store(db)
    if store is None:
        summary: dict[str, Any] = {
            "database": None,
            "requests": {status: 0 for status in STATUSES},
            "tokens": 0,
            "whitelist_rules": 0,
            "outbox": {},
            "audit_events": 0,
        }
        if not json_output:
            _no_database(db)
            return
    else:
        summary = store.summary()
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
    store = _existing_store(db)
    tokens = store.list_tokens() if store else []
    if store is None and not json_output:
        _no_database(db)
        return
    if json_output:
        print_json([t.__dict__ for t in tokens])
        return
    rows = [[t.name, t.role, t.id, _when(t.created_at), _when(t.revoked_at)] for t in tokens]
    print_records(["name", "role", "id", "created", "revoked"], rows, caption="times in UTC")


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
    store = _existing_store(db)
    rules = store.list_rules() if store else []
    if store is None and not json_output:
        _no_database(db)
        return
    if json_output:
        print_json([r.__dict__ for r in rules])
        return
    rows = [[str(r.id), r.action, r.session_key or "(all)", r.created_by, _when(r.created_at)] for r in rules]
    print_records(["id", "action", "session", "by", "created"], rows, heading=1, caption="times in UTC")


@whitelist_app.command("remove")
def whitelist_remove(
    rule_id: Annotated[int, typer.Argument(help="The rule's id.")], db: DbOption = None
) -> None:
    """Remove an auto-approval rule."""
    _store(db).remove_rule(rule_id)
    typer.echo(f"Removed rule {rule_id}.")


@audit_app.command("verify")
def audit_verify(
    expect_head: Annotated[
        str | None,
        typer.Option(
            "--expect-head",
            help="The head an earlier verify printed (<count>:<hash>), kept elsewhere: fails when "
            "rows were cut from the chain's end or that row changed.",
        ),
    ] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Check the audit log; exit 1 when it does not hold.

    Checks the hash chain end to end (a row altered, removed or inserted), every request against
    its audit events (a decision flipped, details edited, a row deleted) and, with --expect-head,
    that the chain still holds the head printed earlier. Keep the printed head somewhere the
    database's users cannot write.
    """
    from kindling.confirm.audit import parse_anchor
    from kindling.confirm.records import AuditReport

    if expect_head:
        parse_anchor(expect_head)  # a malformed anchor is a usage error, whatever the database holds
    store = _existing_store(db)
    if store is not None:
        report = store.verify_audit(expect_head)
    elif expect_head:
        report = AuditReport(False, 0, None, "there is no database, so no chain holds the expected head")
    else:
        report = AuditReport(True, 0, head="0:" + "0" * 64)
    if json_output:
        print_json(report.__dict__)
    elif report.ok and store is None:
        # Nothing to check is not the same as a checked chain: say which it is.
        typer.echo(f"No confirm database yet, so no audit events to verify.\nHead: {report.head}")
    elif report.ok:
        typer.echo(
            f"Audit log intact: {report.rows} events, {report.requests} requests agree with them.\n"
            f"Head: {report.head}"
        )
    else:
        where = f"event {report.bad_seq}" if report.bad_seq else f"request {report.bad_request}"
        err_console.print(f"Audit log BROKEN at {where}: {report.problem}.", markup=False, soft_wrap=True)
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
    store = _existing_store(db)
    events = store.audit_events(limit=limit, request_id=request) if store else []
    if store is None and not json_output:
        _no_database(db)
        return
    if json_output:
        print_json([e.__dict__ for e in events])
        return
    _print_audit(events)


def _print_audit(events: list[Any]) -> None:
    """Two parts an event: seq, time, event and actor on one line; under it, indented and wrapped,
    its request id and data. Nothing is cut: at 80 columns a table cut ids and event names."""
    if not events:
        console.print("No audit events.")
        return
    w_seq = max(3, *(len(str(e.seq)) for e in events))
    console.print(f"{'seq':>{w_seq}}  when (UTC)           event, by whom", style="bold", highlight=False)
    for e in events:
        head = Text(f"{e.seq:>{w_seq}}  {_when(e.at)}  {e.event}, by {e.actor or '-'}")
        console.print(head, overflow="fold")
        detail = " ".join(
            part for part in (f"request={e.request_id}" if e.request_id else "", _audit_data(e.data)) if part
        )
        if detail:
            console.print(Padding(Text(detail, overflow="fold"), (0, 0, 0, w_seq + 2), expand=False))


def _audit_data(data: Any) -> str:
    """An event's data as ``key=value`` pairs (JSON values; text with misleading characters marked,
    as ``pending`` shows them), not a Python dict repr."""
    from kindling.confirm.spoofing import visible_text

    if not isinstance(data, dict):
        return orjson.dumps(data, default=str).decode()
    pairs = []
    for key, value in data.items():
        shown = visible_text(value) if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        pairs.append(f"{key}={shown}")
    return " ".join(pairs)


UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url", help="The daemon (default: KINDLING_CONFIRM_URL, else KINDLING_CONFIRM_HOST/_PORT)."
    ),
]
APPROVER_ENV = "KINDLING_CONFIRM_APPROVER_TOKEN"


def _approver_client(url: str | None) -> Any:
    from kindling.confirm.client import ConfirmClient
    from kindling.confirm.settings import ConfirmSettings
    from kindling.errors import ConfirmError

    # From the environment only: a token on the command line is visible to every local user.
    token = os.environ.get(APPROVER_ENV, "").strip()
    if not token:
        raise ConfirmError(f"{APPROVER_ENV} is not set: export an approver (or admin) token first.")
    base = url or os.environ.get("KINDLING_CONFIRM_URL") or ConfirmSettings.from_env().base_url
    return ConfirmClient(base, token)


def _print_request_json(data: Any) -> None:
    # The standard encoder keeps integers past 64 bits exact, as the daemon sent them.
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _card(r: dict[str, Any]) -> str:
    """The request as the web page shows it, for a terminal (misleading characters marked)."""
    from kindling.confirm.spoofing import visible_text

    left = max(0, int(float(r.get("expires_at") or 0) - time.time()))
    requester = str(r.get("requester"))
    if r.get("requester_label"):
        requester += f" (calls itself {visible_text(str(r['requester_label']))!r})"
    if r.get("session_key"):
        requester += f" · session {visible_text(str(r['session_key']))}"
    lines = [
        f"── {visible_text(str(r.get('action')))}  [{r.get('status')}]",
        f"Request       {r.get('id')}",
        f"Requested by  {requester}",
        f"Submitted     {_when(r.get('created_at'))} UTC",
        f"Expires       {_when(r.get('expires_at'))} UTC (denied if nobody decides; {left}s left)",
        f"Digest        {r.get('digest')}",
    ]
    warnings = r.get("warnings") or []
    if warnings:
        lines.append(f"WARNING: {len(warnings)} character(s) may not be what they look like:")
        for w in warnings[:10]:
            lines.append(f"  {w['field']}: {w['char']} {w['name']} ({w['kind']}) at {w['index']}")
    lines.append("Description:")
    lines.extend("  " + line for line in visible_text(str(r.get("description"))).splitlines() or [""])
    lines.append("Details:")
    pretty = json.dumps(r.get("details"), indent=2, ensure_ascii=False, sort_keys=True)
    lines.extend("  " + line for line in visible_text(pretty).splitlines())
    return "\n".join(lines)


@confirm_app.command("pending")
def pending_command(url: UrlOption = None, json_output: JsonOption = False) -> None:
    """Show the requests waiting for a decision, oldest first, in full (as the web page does).

    Needs a running daemon and an approver or admin token in KINDLING_CONFIRM_APPROVER_TOKEN.
    Example: kindling confirm pending
    """
    with _approver_client(url) as client:
        records = client.list_requests(status="pending", limit=500)
    records.sort(key=lambda r: float(r.get("created_at") or 0))
    if json_output:
        _print_request_json(records)
        return
    if not records:
        typer.echo("Nothing is waiting for a decision.")
        return
    typer.echo("\n\n".join(_card(r) for r in records))


def _decide_command(
    verb: str, request_id: str, reason: str | None, digest: str | None, url: str | None
) -> None:
    from kindling.errors import ConfirmError

    with _approver_client(url) as client:
        shown = client.get(request_id)
        if shown.get("status") != "pending":
            # Nothing to decide: no card promising it will be "denied if nobody decides".
            raise ConfirmError(_decided_line(shown, verb), status_code=409)
        typer.echo(_card(shown))
        # Bound to what was just shown (or to the digest the approver read earlier): if the
        # request changed in between, the daemon refuses with 412.
        call = client.approve if verb == "approve" else client.deny
        record = call(request_id, reason=reason, digest=digest or shown.get("digest"))
    typer.echo(f"{record['action']} {record['status']} by {record['decided_by']} ({record['id']}).")


def _decided_line(r: dict[str, Any], verb: str) -> str:
    """One sentence for a request that is no longer pending: what it became, by whom, when."""
    from kindling.confirm.spoofing import visible_text

    by = f" by {r['decided_by']}" if r.get("decided_by") else ""
    at = f" at {_when(float(r['decided_at']))} UTC" if r.get("decided_at") else ""
    return (
        f"{r.get('id')} ({visible_text(str(r.get('action')))}) is already {r.get('status')}{by}{at}; "
        f"nothing to {verb}."
    )


ReasonOption = Annotated[str | None, typer.Option("--reason", help="Why; kept in the audit log.")]
DigestOption = Annotated[
    str | None,
    typer.Option("--digest", help="The digest you read (from pending); refused if the request differs."),
]


@confirm_app.command("approve")
def approve_command(
    request_id: Annotated[str, typer.Argument(help="The request's id (cr_...).")],
    reason: ReasonOption = None,
    digest: DigestOption = None,
    url: UrlOption = None,
) -> None:
    """Approve a pending request with the approver token in KINDLING_CONFIRM_APPROVER_TOKEN.

    Prints the request as decided on, then the outcome. Example:
    kindling confirm approve cr_0123... --reason "checked the plan"
    """
    _decide_command("approve", request_id, reason, digest, url)


@confirm_app.command("deny")
def deny_command(
    request_id: Annotated[str, typer.Argument(help="The request's id (cr_...).")],
    reason: ReasonOption = None,
    digest: DigestOption = None,
    url: UrlOption = None,
) -> None:
    """Deny a pending request with the approver token in KINDLING_CONFIRM_APPROVER_TOKEN."""
    _decide_command("deny", request_id, reason, digest, url)


def register(app: typer.Typer) -> None:
    """Add the ``confirm`` command group to the root app."""
    app.add_typer(confirm_app, name="confirm")
