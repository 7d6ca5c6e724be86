"""``kindling mcp``: serve kindling's tools and resources to any MCP client (stdio or streamable HTTP)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from kindling.config import MCP_DEFAULT_PORT as DEFAULT_PORT
from kindling.config import MCP_TOKEN_ENV as TOKEN_ENV


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command to the root app."""

    @app.command("mcp")
    def mcp_command(
        http: Annotated[
            bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio.")
        ] = False,
        host: Annotated[str, typer.Option(help="--http: address to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="--http: port to listen on.")] = DEFAULT_PORT,
        token: Annotated[
            str | None,
            typer.Option(
                help=f"--http: bearer token every request must carry (default ${TOKEN_ENV}); "
                "required when --host is not loopback.",
                show_default=False,
            ),
        ] = None,
        sources: Annotated[
            list[str] | None,
            typer.Option(
                "--source",
                help="Session source tool_failure_rates and warm_session's build read (repeatable; default "
                "$HERMES_HOME/state.db). Clients cannot name others.",
                show_default=False,
            ),
        ] = None,
        allow_host: Annotated[
            list[str] | None,
            typer.Option(
                "--allow-host",
                help="--http: a host name clients reach the server by (repeatable); any other is refused. "
                "Always allowed: localhost, loopback addresses and --host.",
                show_default=False,
            ),
        ] = None,
        log_level: Annotated[str, typer.Option(help="--http: uvicorn log level.")] = "warning",
        log_format: Annotated[
            str,
            typer.Option(
                "--log-format", help="--http: human (default) or json: one JSON object a line on stderr."
            ),
        ] = "human",
        metrics: Annotated[
            bool,
            typer.Option(
                "--metrics/--no-metrics",
                help="--http: answer Prometheus /metrics (default on); it takes the bearer token or the "
                "metrics token (KINDLING_MCP_METRICS_TOKEN).",
            ),
        ] = True,
    ) -> None:
        """Serve warm_session, request_confirmation, tool_failure_rates, memory and skills over MCP.

        The confirmation tool reaches the daemon at KINDLING_CONFIRM_URL with KINDLING_CONFIRM_TOKEN.

        Examples:

            claude mcp add kindling -- kindling mcp

            kindling mcp --http --port 8765

        Over HTTP it also answers /health, /ready and /metrics (see docs/operations.md).
        """
        from kindling.integrations.mcp import METRICS_TOKEN_ENV, McpSettings, run_http, run_stdio
        from kindling.observe.logs import LOG_FORMATS

        if log_format not in LOG_FORMATS:
            raise typer.BadParameter(f"use {' or '.join(LOG_FORMATS)}", param_hint="--log-format")
        settings = McpSettings.from_env(sources=sources or ())
        if http:
            run_http(
                settings,
                host=host,
                port=port,
                token=token or os.environ.get(TOKEN_ENV),
                log_level=log_level,
                allow_hosts=tuple(allow_host or ()),
                log_format=log_format,
                metrics=metrics,
                metrics_token=os.environ.get(METRICS_TOKEN_ENV) or None,
            )
        else:
            run_stdio(settings)
