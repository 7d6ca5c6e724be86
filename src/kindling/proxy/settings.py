"""The proxy's settings: where it listens, where it forwards, where it records, who may use it."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kindling.config import env_str, kindling_home
from kindling.errors import ConfigError

__all__ = ["DEFAULT_PORT", "ProxySettings", "default_db", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6100
#: The largest request body the proxy reads (64 MiB: far above a provider's own limit with images).
DEFAULT_MAX_BODY_MB = 64
#: The shortest metrics token accepted (the daemon's rule).
MIN_METRICS_TOKEN = 16


def default_db() -> str:
    """Where recordings go by default: ``$KINDLING_PROXY_DB`` or ``$KINDLING_HOME/proxy.db``."""
    return env_str("KINDLING_PROXY_DB", str(kindling_home() / "proxy.db"))


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ProxySettings:
    """Everything ``create_app`` needs. Build with ``ProxySettings.resolve(...)`` to apply defaults,
    environment variables and the access rule."""

    upstream: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    db: str = ""
    token: str | None = None
    upstream_key: str | None = None
    warm: bool = True
    template: str | None = None
    templates: str | None = None
    budget: int | None = None
    #: Show the templates' lessons (past failures and what worked next) after the examples.
    lessons: bool = True
    queue_size: int = 10_000
    connect_timeout: float = 10.0
    max_body_bytes: int = DEFAULT_MAX_BODY_MB * 1024 * 1024
    #: Host names beyond the loopback names and ``host`` that requests may be addressed to.
    allow_hosts: tuple[str, ...] = ()
    #: Seconds a request's headers and body may take to arrive (slow clients are cut off).
    read_timeout: float = 20.0
    #: Background builds of each tenant's template: after this many new conversations (0: never) ...
    build_every: int = 5
    #: ... and every this many seconds while there are conversations not yet built from; a
    #: tenant's builds start at least ``build_gap`` seconds apart.
    build_interval: float = 600.0
    build_gap: float = 30.0
    #: Prometheus metrics at /metrics; off, the proxy neither counts nor answers them.
    metrics: bool = True
    #: A token good only for reading /metrics (the default tenant's token reads them too).
    metrics_token: str | None = None

    @classmethod
    def resolve(
        cls,
        upstream: str,
        *,
        host: str | None = None,
        port: int | None = None,
        db: str | Path | None = None,
        token: str | None = None,
        upstream_key_env: str | None = None,
        metrics_token: str | None = None,
        **options: Any,
    ) -> ProxySettings:
        """Settings with defaults filled in: the store defaults to ``default_db()``, the token to
        ``$KINDLING_PROXY_TOKEN``, the metrics token to ``$KINDLING_PROXY_METRICS_TOKEN``, the
        upstream key is read from ``upstream_key_env``.

        Raises ConfigError for an upstream that is not an http(s) URL, an unset key variable, a
        metrics token under 16 characters, or a non-loopback address without a token (the proxy is
        never an open relay).
        """
        if not upstream.startswith(("http://", "https://")):
            raise ConfigError(f"--upstream must be an http:// or https:// URL, not {upstream!r}.")
        key: str | None = None
        if upstream_key_env:
            key = os.environ.get(upstream_key_env) or None
            if key is None:
                raise ConfigError(f"--upstream-key-env names {upstream_key_env}, which is not set.")
        chosen_token = token or os.environ.get("KINDLING_PROXY_TOKEN") or None
        chosen_metrics_token = metrics_token or os.environ.get("KINDLING_PROXY_METRICS_TOKEN") or None
        if chosen_metrics_token is not None and len(chosen_metrics_token) < MIN_METRICS_TOKEN:
            raise ConfigError(
                f"KINDLING_PROXY_METRICS_TOKEN must be at least {MIN_METRICS_TOKEN} characters "
                "(openssl rand -hex 24 makes one)."
            )
        chosen_host = host or DEFAULT_HOST
        if not is_loopback(chosen_host) and not chosen_token:
            raise ConfigError(
                f"Refusing to listen on {chosen_host} without a token: set --token or KINDLING_PROXY_TOKEN "
                "(on loopback none is needed)."
            )
        return cls(
            upstream=upstream.rstrip("/"),
            host=chosen_host,
            port=DEFAULT_PORT if port is None else port,
            db=str(db) if db else default_db(),
            token=chosen_token,
            upstream_key=key,
            metrics_token=chosen_metrics_token,
            **options,
        )

    def with_(self, **changes: Any) -> ProxySettings:
        """A copy with ``changes`` applied."""
        return replace(self, **changes)

    @property
    def shown_upstream(self) -> str:
        """The upstream URL as shown (start-up line, status, errors): any credentials in it hidden."""
        from kindling.httpguard import redact_userinfo

        return redact_userinfo(self.upstream)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL clients point at: ``http://HOST:PORT/v1``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"
