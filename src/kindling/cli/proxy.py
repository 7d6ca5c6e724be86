"""``kindling proxy``: a proxy for OpenAI-compatible and Anthropic endpoints that records conversations
and warms new ones.

A thin client of ``kindling.proxy``: ``kindling proxy --upstream URL`` runs it in the foreground;
``kindling proxy path`` says where it records; ``kindling proxy status`` asks a running proxy.
"""

from __future__ import annotations

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
            help="Token clients must send in the X-Kindling-Token header (default KINDLING_PROXY_TOKEN). "
            "Required off loopback.",
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
    max_body_mb: Annotated[
        int | None,
        typer.Option(
            "--max-body-mb",
            min=1,
            help="Largest request body in MiB (default 64); a larger one is refused with 413 before it "
            "is read.",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Run the proxy in the foreground. Point the agent's base URL at http://HOST:PORT/v1
    (an Anthropic client's at http://HOST:PORT: its SDK adds /v1/messages).

    Examples:

      kindling proxy --upstream https://api.openai.com/v1

      kindling proxy --upstream https://api.anthropic.com/v1     # then ANTHROPIC_BASE_URL=http://127.0.0.1:6100

      kindling proxy --upstream http://127.0.0.1:11434/v1 --db postgresql://kindling@db/kindling

      kindling proxy --upstream https://api.openai.com/v1 --host 0.0.0.0 --token "$TOKEN" --upstream-key-env OPENAI_API_KEY
    """
    if ctx.invoked_subcommand is not None:
        return
    from kindling.errors import ConfigError
    from kindling.proxy import ProxySettings, serve

    if not upstream:
        raise ConfigError(
            "--upstream is required: the base URL to forward to (e.g. https://api.openai.com/v1)."
        )
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
        **({} if max_body_mb is None else {"max_body_bytes": max_body_mb * 1024 * 1024}),
    )
    err_console.print(
        f"kindling proxy on {settings.base_url} -> {settings.upstream}; recording to "
        f"{_shown(settings.db)}; warm-up {'on' if settings.warm else 'off'}",
        markup=False,
        soft_wrap=True,
    )
    serve(settings, log_level=log_level)


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
    console.print(
        f"upstream {data['upstream']}, warm-up {'on' if data['warm'] else 'off'}\n"
        f"store {recorder['store']} ({recorder['store_state']}): {recorder['written']} writes, "
        f"{recorder['pending']} pending, {recorder['dropped']} dropped",
        markup=False,
        highlight=False,
    )


def _shown(target: str) -> str:
    from kindling.db import redact_url

    return redact_url(target)


def register(app: typer.Typer) -> None:
    """Add the ``proxy`` command group to the root app."""
    app.add_typer(proxy_app, name="proxy")
