"""Tenants: who a request to the proxy is, from the token it sends.

Each tenant has tokens (``kindling proxy token create --tenant NAME``) stored in the proxy's store
as SHA-256 digests, like the confirmation daemon's: the raw token is shown once and never kept.
The single ``--token`` (or ``KINDLING_PROXY_TOKEN``) keeps working as the default tenant's. A
proxy with neither answers on loopback only, everyone as the default tenant.

``TenantTokens`` creates, lists and revokes tokens; ``TenantAuth`` is what the proxy asks on every
request: it matches the token against a snapshot of the live tokens, re-read in the background
every ``refresh`` seconds (so a revoked token stops working within that time) and at once, at most
that often, when a token it does not know arrives (so a new one works at once).
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from kindling.errors import ConfigError, InvalidNameError, NotFoundError
from kindling.proxy.recorder import ProxyStore
from kindling.sessions.recorded import DEFAULT_TENANT, tokens_table
from kindling.templates.model import validate_name

__all__ = ["DEFAULT_TENANT", "TOKEN_PREFIX", "TenantAuth", "TenantToken", "TenantTokens", "validate_tenant"]

log = logging.getLogger("kindling.proxy")

TOKEN_PREFIX = "kpx_"
#: Tenant names become template names (``proxy-<tenant>``), which stop at 64 characters.
MAX_TENANT = 48


def validate_tenant(name: str) -> str:
    """Return ``name`` when it can name a tenant: letters, digits, ``-``, ``_``, ``.``, at most 48.

    Raises InvalidNameError otherwise.
    """
    validate_name(name, kind="tenant")
    if len(name) > MAX_TENANT:
        raise InvalidNameError(
            f"Tenant name {name[:20]!r}... is {len(name)} characters; the limit is {MAX_TENANT}.",
            name=name,
            kind="tenant",
        )
    return name


def hash_token(raw: str) -> str:
    """The SHA-256 hex digest a token is stored under."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TenantToken:
    """A tenant's token as stored (never its secret)."""

    id: str
    tenant: str
    created_at: float
    revoked_at: float | None

    def as_dict(self) -> dict[str, Any]:
        """The token as JSON-ready data."""
        return {
            "id": self.id,
            "tenant": self.tenant,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
            "live": self.revoked_at is None,
        }


class TenantTokens:
    """The tenants' tokens in a proxy store (SQLite or PostgreSQL)."""

    def __init__(self, store: ProxyStore) -> None:
        self.store = store

    def create(self, tenant: str) -> tuple[TenantToken, str]:
        """Create a token for ``tenant``; return it and its raw secret (shown once, stored hashed).

        Raises InvalidNameError for a bad tenant name, StoreError when the store fails.
        """
        from kindling.db import translate_errors

        validate_tenant(tenant)
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = TenantToken("ptok_" + secrets.token_hex(8), tenant, time.time(), None)
        with translate_errors(self.store.target, "write to"):
            self.store.ensure_ready()
            with self.store.engine.begin() as conn:
                conn.execute(
                    tokens_table.insert().values(
                        id=token.id,
                        tenant=tenant,
                        token_hash=hash_token(raw),
                        created_at=token.created_at,
                        revoked_at=None,
                    )
                )
        return token, raw

    def list(self) -> list[TenantToken]:
        """Every token, revoked ones too, oldest first. Raises StoreError when the store fails."""
        from kindling.db import translate_errors

        t = tokens_table
        with translate_errors(self.store.target, "read"):
            self.store.ensure_ready()
            with self.store.engine.connect() as conn:
                rows = conn.execute(sa.select(t).order_by(t.c.created_at, t.c.id)).all()
        return [TenantToken(r.id, r.tenant, r.created_at, r.revoked_at) for r in rows]

    def revoke(self, token_id: str | None = None, *, tenant: str | None = None) -> builtins.list[TenantToken]:
        """Revoke one token by id, or every live token of ``tenant``; return those revoked.

        Raises NotFoundError when nothing live matches, StoreError when the store fails.
        """
        from kindling.db import translate_errors

        t = tokens_table
        if (token_id is None) == (tenant is None):
            raise ConfigError("Name one token id, or one tenant with --tenant, to revoke.")
        where = t.c.id == token_id if token_id is not None else t.c.tenant == tenant
        now = time.time()
        with translate_errors(self.store.target, "write to"):
            self.store.ensure_ready()
            with self.store.engine.begin() as conn:
                rows = conn.execute(sa.select(t).where(where, t.c.revoked_at.is_(None))).all()
                if rows:
                    conn.execute(t.update().where(where, t.c.revoked_at.is_(None)).values(revoked_at=now))
        if not rows:
            what = f"token {token_id!r}" if token_id is not None else f"token of tenant {tenant!r}"
            raise NotFoundError(f"No live {what}.", kind="token", name=token_id or tenant or "")
        return [TenantToken(r.id, r.tenant, r.created_at, now) for r in rows]

    def live(self) -> dict[str, str]:
        """Digest -> tenant of every live token. Raises what the store raises when it is down."""
        t = tokens_table
        self.store.ensure_ready()
        with self.store.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.token_hash, t.c.tenant).where(t.c.revoked_at.is_(None))).all()
        return {row.token_hash: row.tenant for row in rows}


class Refusal(Exception):
    """A request without a token the proxy accepts: its status and one sentence."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class TenantAuth:
    """The tenant of each request, from its token.

    ``token`` is the single ``--token`` (the default tenant's); ``upstream_key`` says the proxy
    holds the upstream key, so a client may send its token as its API key (``Authorization:
    Bearer``, ``x-api-key``) instead of in ``X-Kindling-Token``.
    """

    def __init__(
        self, tokens: TenantTokens, *, token: str | None, upstream_key: bool, refresh: float = 2.0
    ) -> None:
        self.tokens = tokens
        self.token = token
        self.upstream_key = upstream_key
        self.refresh = refresh
        self._live: dict[str, str] | None = None
        self._read_at = float("-inf")
        self._reading: asyncio.Task[None] | None = None

    @property
    def tenant_tokens(self) -> int | None:
        """How many live tenant tokens the last read found (None: never read)."""
        return None if self._live is None else len(self._live)

    def read(self) -> None:
        """Re-read the live tokens now (blocking); a store that is down keeps the last snapshot."""
        try:
            self._live = self.tokens.live()
        except Exception as exc:
            log.warning("cannot read the tenants' tokens, keeping what was read before: %s", _line(exc))
        self._read_at = time.monotonic()

    async def refresh_forever(self) -> None:
        """Re-read the live tokens every ``refresh`` seconds until cancelled."""
        while True:
            await self._reread()
            await asyncio.sleep(self.refresh)

    async def _reread(self) -> None:
        # One read at a time, shared by whoever asks while it runs.
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(asyncio.to_thread(self.read))
        await asyncio.shield(self._reading)

    async def tenant_of(self, headers: Mapping[str, str]) -> str:
        """The tenant of a request with ``headers``. Raises Refusal (401, or 503 while the tokens
        cannot be read and no ``--token`` is set)."""
        offered = self._offered(headers)
        if self.token and any(hmac.compare_digest(o.encode(), self.token.encode()) for o in offered):
            return DEFAULT_TENANT
        tenant = self._match(offered)
        stale = time.monotonic() - self._read_at >= min(self.refresh, 1.0)
        if tenant is None and stale and any(o.startswith(TOKEN_PREFIX) for o in offered):
            await self._reread()  # perhaps a token created since the last read
            tenant = self._match(offered)
        if tenant is not None:
            return tenant
        if self.token or self._live:
            raise Refusal(401, f"kindling proxy: send a proxy token in the {TOKEN_HEADER} header.")
        if self._live is None:
            raise Refusal(
                503,
                "kindling proxy: cannot check tokens while its store is unreachable; retry shortly.",
            )
        return DEFAULT_TENANT

    def _match(self, offered: list[str]) -> str | None:
        live = self._live
        if not live:
            return None
        for raw in offered:
            if raw.startswith(TOKEN_PREFIX) and len(raw) < 200:
                found = live.get(hash_token(raw))
                if found is not None:
                    return found
        return None

    def _offered(self, headers: Mapping[str, str]) -> list[str]:
        offered: list[str] = []
        given = headers.get(TOKEN_HEADER)
        if given:
            offered.append(given.strip())
        if self.upstream_key:
            auth = headers.get("authorization", "")
            if auth[:7].lower() == "bearer ":
                offered.append(auth[7:].strip())
            key = headers.get("x-api-key")
            if key:
                offered.append(key.strip())
        return offered


#: The header a client sends the proxy's token in (beside its own Authorization for the upstream).
TOKEN_HEADER = "x-kindling-token"


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
