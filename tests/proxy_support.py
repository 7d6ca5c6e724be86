"""Helpers the proxy tests share: a proxy on loopback, a template to warm from, SSE parsing."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from kindling.mining.model import Example
from kindling.proxy import ProxyServer, ProxySettings
from kindling.templates import JsonDirStore, Template

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "terminal")
]

EXAMPLES = [
    Example(
        tool_name="read_file",
        context="Read src/parser.py to find the tokenizer bug",
        result="def tokenize(): ...",
    ),
    Example(tool_name="read_file", context="Open the parser module", result="class Parser: ..."),
    Example(tool_name="terminal", context="Run the unit tests for the parser", result="12 passed"),
    Example(tool_name="web_search", context="Search the web for the parser docs", result="found 3 pages"),
]


def save_template(templates: Path) -> None:
    """A template with examples of read_file, terminal and web_search (a tool the tests never offer)."""
    JsonDirStore(templates).save(Template(name="code", task_type="code", examples=EXAMPLES))


@contextlib.contextmanager
def running_proxy(upstream: str, db: str | Path, **options: Any) -> Iterator[ProxyServer]:
    """A proxy on a free loopback port, stopped (after writing what it queued) on exit."""
    settings = ProxySettings.resolve(upstream, port=0, db=db, **options)
    server = ProxyServer(settings).start()
    try:
        yield server
    finally:
        server.stop()


def status(base_url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The proxy's /kindling/status."""
    root = base_url.removesuffix("/v1")
    return httpx.get(f"{root}/kindling/status", headers=headers or {}, timeout=5).json()


def wait_recorded(
    base_url: str, timeout: float = 20.0, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """Wait until the proxy's recorder has written everything queued; return its status."""
    deadline = time.monotonic() + timeout
    while True:
        recorder = status(base_url, headers)["recorder"]
        if recorder["pending"] == 0 and recorder["store_state"] == "up":
            return recorder
        if time.monotonic() > deadline:
            raise AssertionError(f"recorder did not drain: {recorder}")
        time.sleep(0.02)


def message_of_stream(raw: bytes) -> dict[str, Any]:
    """Rebuild the assistant message from raw chat-completion SSE bytes (independently of the proxy)."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    for line in raw.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        delta = json.loads(line[6:])["choices"][0]["delta"]
        content += delta.get("content") or ""
        for call in delta.get("tool_calls") or ():
            slot = calls.setdefault(
                call["index"], {"type": "function", "function": {"name": "", "arguments": ""}}
            )
            if call.get("id"):
                slot["id"] = call["id"]
            slot["function"]["name"] += call.get("function", {}).get("name") or ""
            slot["function"]["arguments"] += call.get("function", {}).get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message
