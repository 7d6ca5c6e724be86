"""``kindling proxy``: a proxy for OpenAI-compatible and Anthropic endpoints that records conversations
and warms new ones.

A thin client of ``kindling.proxy``: ``kindling proxy --upstream URL`` runs it in the foreground;
``kindling proxy path`` says where it records; ``kindling proxy status`` asks a running proxy;
``kindling proxy token create|list|revoke`` manages the tenants' tokens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from kindling.cli.common import JsonOption, console, err_console, print_json

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Where to record: a SQLite path or a postgresql:// URL (several proxies can share one). "
        "Default: KINDLING_PROXY_DB or $KINDLING_HOME/proxy.db.",
    ),
]

proxy_app = typer.Typer(
    help="A proxy for OpenAI-compatible and Anthropic endpoints: records every conversation, warms each "
    "new one.",
    invoke_without_command=True,
)


@proxy_app.callback()
def proxy_command(
    ctx: typer.Context,
    upstream: Annotated[
        str | None,
        typer.Option(
            help="The base URL the agent used before, e.g. https://api.openai.com/v1 (chat completions, "
            "Responses API) "
            "or https://api.anthropic.com/v1 (Messages API)."
        ),
    ] = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on; off loopback a token is required.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 6100,
    db: DbOption = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Token clients must send in the X-Kindling-Token header (default KINDLING_PROXY_TOKEN): "
            "the default tenant's. Required off loopback. Tenants' tokens: `kindling proxy token create`.",
        ),
    ] = None,
    upstream_key_env: Annotated[
        str | None,
        typer.Option(
            "--upstream-key-env",
            help="Name of an environment variable holding the upstream API key, sent instead of the "
            "client's (as a bearer token, or in x-api-key to /v1/messages).",
        ),
    ] = None,
    no_warm: Annotated[bool, typer.Option("--no-warm", help="Record only; never insert a warm-up.")] = False,
    template: Annotated[
        str | None,
        typer.Option(help="Always warm from this template (default: the best fit per conversation)."),
    ] = None,
    templates: Annotated[
        str | None,
        typer.Option(help="Template store (default: KINDLING_TEMPLATE_STORE or $KINDLING_HOME/templates)."),
    ] = None,
    budget: Annotated[int | None, typer.Option(help="Token budget of a warm-up.")] = None,
    no_lessons: Annotated[
        bool,
        typer.Option(
            "--no-lessons",
            help="Warm with examples only: leave out the templates' lessons (past failures of the tools "
            "shown and what worked next).",
        ),
    ] = False,
    max_body_mb: Annotated[
        int | None,
        typer.Option(
            "--max-body-mb",
            min=1,
            help="Largest request body in MiB (default 64); a larger one is refused with 413 before it "
            "is read.",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="A host name clients reach the proxy by (repeatable); requests to any other name are "
            "refused. Always allowed: localhost, loopback addresses and --host.",
            show_default=False,
        ),
    ] = None,
    read_timeout: Annotated[
        float,
        typer.Option("--read-timeout", help="Seconds a request's headers and body may take to arrive."),
    ] = 20.0,
    build_every: Annotated[
        int,
        typer.Option(
            "--build-every",
            min=0,
            help="Rebuild a tenant's template (proxy-TENANT) in the background after this many new "
            "conversations; 0 turns background builds off.",
        ),
    ] = 5,
    build_interval: Annotated[
        float,
        typer.Option(
            "--build-interval",
            help="Also rebuild, every this many seconds, the templates of tenants with new conversations.",
        ),
    ] = 600.0,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
    log_format: Annotated[
        str, typer.Option("--log-format", help="human (default) or json: one JSON object a line on stderr.")
    ] = "human",
    metrics: Annotated[
        bool,
        typer.Option(
            "--metrics/--no-metrics",
            help="Answer Prometheus /metrics and count for it (default on). /metrics takes the metrics "
            "token (KINDLING_PROXY_METRICS_TOKEN) or the default tenant's.",
        ),
    ] = True,
) -> None:
    """Run the proxy in the foreground. Point the agent's base URL at http://HOST:PORT/v1
    (an Anthropic client's at http://HOST:PORT: its SDK adds /v1/messages). It answers /health,
    /ready and /metrics (see docs/operations.md).

    Examples:

      kindling proxy --upstream https://api.openai.com/v1

      kindling proxy --upstream https://api.anthropic.com/v1     # then ANTHROPIC_BASE_URL=http://127.0.0.1:6100

      kindling proxy --upstream http://127.0.0.1:11434/v1 --db postgresql://kindling@db/kindling

      kindling proxy --upstream https://api.openai.com/v1 --host 0.0.0.0 --allow-host proxy.internal --token "$TOKEN" --upstream-key-env OPENAI_API_KEY
    """
    if ctx.invoked_subcommand is not None:
        return
    from kindling.errors import ConfigError
    from kindling.proxy import ProxySettings, serve

    if not upstream:
        raise ConfigError(
            "--upstream is required: the base URL to forward to (e.g. https://api.openai.com/v1)."
        )
    from kindling.observe.logs import LOG_FORMATS

    if log_format not in LOG_FORMATS:
        raise typer.BadParameter(f"use {' or '.join(LOG_FORMATS)}", param_hint="--log-format")
    if read_timeout <= 0 or build_interval < 0:
        raise ConfigError("--read-timeout must be above 0 seconds and --build-interval 0 or more.")
    body_limit: dict[str, Any] = {} if max_body_mb is None else {"max_body_bytes": max_body_mb * 1024 * 1024}
    settings = ProxySettings.resolve(
        upstream,
        host=host,
        port=port,
        db=db,
        token=token,
        upstream_key_env=upstream_key_env,
        warm=not no_warm,
        template=template,
        templates=templates,
        budget=budget,
        lessons=not no_lessons,
        allow_hosts=tuple(allow_host or ()),
        read_timeout=read_timeout,
        build_every=build_every,
        build_interval=build_interval if build_every else 0.0,
        metrics=metrics,
        **body_limit,
    )
    serve(
        settings,
        log_level=log_level,
        log_format=log_format,
        announce=_announce if log_format == "human" else _log_announce,
    )


def _announce(line: str) -> None:
    err_console.print(line, markup=False, soft_wrap=True)


def _log_announce(line: str) -> None:
    # With --log-format json, stderr stays one JSON object a line.
    import logging

    logging.getLogger("kindling.proxy").info(line)


@proxy_app.command("path")
def path_command(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Print where the proxy records (read it with `kindling sessions PATH`)."""
    from kindling.proxy import default_db

    target = db or default_db()
    if json_output:
        print_json({"db": _shown(target)})
    else:
        typer.echo(_shown(target))


@proxy_app.command("status")
def status_command(
    url: Annotated[str, typer.Option(help="The running proxy's address.")] = "http://127.0.0.1:6100",
    token: Annotated[
        str | None, typer.Option(help="The proxy's token (default KINDLING_PROXY_TOKEN).")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Ask a running proxy what it has recorded, queued and dropped."""
    import os

    import httpx

    from kindling.errors import EndpointError

    headers = {}
    chosen = token or os.environ.get("KINDLING_PROXY_TOKEN")
    if chosen:
        headers["x-kindling-token"] = chosen
    try:
        response = httpx.get(
            url.rstrip("/").removesuffix("/v1") + "/kindling/status", headers=headers, timeout=5
        )
    except httpx.HTTPError as exc:
        raise EndpointError(f"Cannot reach the proxy at {url}: {exc}.") from exc
    if response.status_code != 200:
        raise EndpointError(f"The proxy at {url} answered {response.status_code}: {response.text[:200]}")
    data: dict[str, Any] = response.json()
    if json_output:
        print_json(data)
        return
    recorder = data["recorder"]
    template = data.get("template") or {}
    console.print(
        f"upstream {data['upstream']}, warm-up {'on' if data['warm'] else 'off'}, tenant {data.get('tenant')}\n"
        f"{template.get('summary', '')}\n"
        f"conversations {data['conversations']} ({data['warmed']} warmed, {data.get('branches', 0)} branches), "
        f"{data['replies']} replies, {data.get('unverified_turns', 0)} unverified assistant turns\n"
        f"store {recorder['store']} ({recorder['store_state']}): {recorder['written']} writes, "
        f"{recorder['pending']} pending, {recorder['dropped']} dropped",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


token_app = typer.Typer(
    help="The tenants' tokens: each tenant's conversations, labels and warm-ups are its own.",
    no_args_is_help=True,
)
proxy_app.add_typer(token_app, name="token")


@contextlib.contextmanager
def _tokens(db: str | None) -> Iterator[Any]:
    from kindling.proxy import default_db
    from kindling.proxy.recorder import ProxyStore
    from kindling.proxy.tenants import TenantTokens

    store = ProxyStore(db or default_db())
    try:
        yield TenantTokens(store)
    finally:
        store.close()


@token_app.command("create")
def token_create(
    tenant: Annotated[
        str, typer.Option("--tenant", help="The tenant the token acts for: letters, digits, '-', '_', '.'.")
    ],
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Create a token for a tenant and print it once (it is stored only as a digest).

    A proxy with tenant tokens refuses requests without a token it knows; the tenant's clients send
    theirs in the X-Kindling-Token header (or as their API key when the proxy holds the upstream key).

    Example:

      kindling proxy token create --tenant alice
    """
    with _tokens(db) as tokens:
        token, raw = tokens.create(tenant)
    if json_output:
        print_json({**token.as_dict(), "token": raw})
        return
    err_console.print(f"Token {token.id} for tenant {token.tenant} (shown once, keep it):", markup=False)
    typer.echo(raw)


@token_app.command("list")
def token_list(db: DbOption = None, json_output: JsonOption = False) -> None:
    """List the tenants' tokens (ids and tenants, never the secrets)."""
    with _tokens(db) as store:
        tokens = store.list()
    if json_output:
        print_json({"tokens": [t.as_dict() for t in tokens]})
        return
    if not tokens:
        console.print("No tenant tokens: create one with `kindling proxy token create --tenant NAME`.")
        return
    from datetime import datetime, timezone

    for t in tokens:
        when = datetime.fromtimestamp(t.created_at, timezone.utc).strftime("%Y-%m-%d %H:%M")
        state = "live" if t.revoked_at is None else "revoked"
        console.print(f"{t.id}  {t.tenant}  {state}  created {when} UTC", markup=False, highlight=False)


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[
        str | None, typer.Argument(help="The token's id (see `kindling proxy token list`).")
    ] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Revoke every live token of this tenant.")
    ] = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Revoke a token (or all of a tenant's); a running proxy refuses it within seconds."""
    with _tokens(db) as tokens:
        revoked = tokens.revoke(token_id, tenant=tenant)
    if json_output:
        print_json({"revoked": [t.as_dict() for t in revoked]})
        return
    for t in revoked:
        console.print(f"Revoked {t.id} (tenant {t.tenant}).", markup=False, highlight=False)


def _shown(target: str) -> str:
    from kindling.db import redact_url

    return redact_url(target)


def register(app: typer.Typer) -> None:
    """Add the ``proxy`` command group to the root app."""
    app.add_typer(proxy_app, name="proxy")
