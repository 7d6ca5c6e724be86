"""kindling.proxy: a proxy for OpenAI-compatible (chat completions, Responses API) and Anthropic endpoints
that records every conversation and warms new ones.

Point an agent's base URL at it (``kindling proxy --upstream URL``); see docs/proxy.md.
"""

from __future__ import annotations

from kindling.proxy.app import TOKEN_HEADER, create_app
from kindling.proxy.recorder import ProxyStore, Recorder
from kindling.proxy.server import ProxyServer, serve
from kindling.proxy.settings import ProxySettings, default_db

__all__ = [
    "TOKEN_HEADER",
    "ProxyServer",
    "ProxySettings",
    "ProxyStore",
    "Recorder",
    "create_app",
    "default_db",
    "serve",
]
