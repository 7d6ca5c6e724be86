"""What does the kindling plugin add to each API call of a real Hermes Agent 0.19.0 session?

Runs inside the Hermes test environment (``make hermes-env``; started with another interpreter it
re-runs itself with ``build/hermes-0.19.0/bin/python``). It first runs ``hermes -z`` once against the
loopback fake OpenAI server to capture the exact request Hermes sends (its system prompt and tool
schemas), then loads the plugin through Hermes's own plugin manager and measures, in the same run:

- the call: that request POSTed to the fake server and its streamed answer read (the baseline);
- per call after the first: Hermes's request-middleware pass with the plugin (a cache hit: the
  session's warm-up inserted again; Hermes deep-copies the request for any middleware) plus the
  call with the warmed request, against the plain call (no middleware: Hermes skips the pass);
  and the ``pre_tool_call`` hook for an ordinary command (Hermes's own danger check, no daemon);
- the one-time warm-up on a session's first call (choose the template, select, build), both the
  very first in a fresh process (imports and index included) and the median of later sessions.

Variants alternate so drift hits both. Every figure is printed with its ratio to the call.

    build/hermes-0.19.0/bin/python bench/hermes_overhead.py           # 200 calls of each
    build/hermes-0.19.0/bin/python bench/hermes_overhead.py --quick   # 30 calls of each
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERMES_PYTHON = ROOT / "build" / "hermes-0.19.0" / "bin" / "python"
sys.path.insert(0, str(ROOT / "tests"))  # the loopback fake server lives with the tests


def _ensure_hermes() -> None:
    try:
        import hermes_cli  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        if not HERMES_PYTHON.is_file():
            sys.exit(
                f"Hermes Agent is not installed at {HERMES_PYTHON.parent.parent}: run `make hermes-env` first."
            )
        os.execv(str(HERMES_PYTHON), [str(HERMES_PYTHON), __file__, *sys.argv[1:]])


def _template(home: Path) -> None:
    os.environ["KINDLING_HOME"] = str(home / "kindling")
    from kindling.templates.model import Example, Template
    from kindling.templates.store import open_store

    examples = []
    for i in range(60):
        tool = ("terminal", "read_file", "search_files", "patch", "web_search")[i % 5]
        examples.append(
            Example(
                tool_name=tool,
                context=f"Task {i}: run the unit tests for module {i % 7} and fix the failing parser case",
                arguments={"command": f"pytest tests/test_mod{i % 7}.py -q"}
                if tool == "terminal"
                else {"path": f"src/m{i}.py"},
                result=f"{i % 9 + 1} passed in 0.{i % 10}s",
            )
        )
    open_store().save(Template(name="bench", description="coding work", examples=examples))


def _config(home: Path, base_url: str, plugin: bool) -> None:
    settings = "      settings: {confirm_token: bench-token, confirm_url: 'http://127.0.0.1:9'}\n"
    (home / "config.yaml").write_text(
        "model:\n  default: fake-model\n  provider: custom\n"
        f"  base_url: {base_url}\n  api_key: sk-test\n"
        f"plugins:\n  enabled: [{'kindling' if plugin else ''}]\n  entries:\n    kindling:\n{settings}",
        encoding="utf-8",
    )


def _capture(home: Path, fake: Any) -> dict[str, Any]:
    """Run Hermes once (plugin off) and return the request body its agent loop sent."""
    from fake_openai import text

    _config(home, fake.base_url, plugin=False)
    fake.script = [text("ok")]
    subprocess.run(
        [
            str(Path(sys.executable).parent / "hermes"),
            "-z",
            "Run the unit tests for the parser module",
            "-t",
            "terminal,file,web",
        ],
        env={**os.environ, "HERMES_HOME": str(home)},
        cwd=str(home),
        capture_output=True,
        timeout=180,
        check=True,
    )
    body = fake.chat_requests()[-1]
    fake.requests.clear()
    return dict(body)


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 calls of each instead of 200")
    parser.add_argument("--calls", type=int, default=None)
    args = parser.parse_args()
    calls = args.calls or (30 if args.quick else 200)
    _ensure_hermes()

    import httpx

    from fake_openai import FakeOpenAI

    fake = FakeOpenAI()
    fake.start()
    # The fake server writes headers and body separately; with Nagle's algorithm on, each answer
    # waits ~40 ms for a delayed ACK, which would swell the baseline and flatter every ratio.
    # Accepted connections inherit the listening socket's TCP_NODELAY on Linux.
    assert fake._server is not None
    fake._server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "hermes"
        home.mkdir()
        os.environ["HERMES_HOME"] = str(home)
        _template(Path(tmp))
        body = _capture(home, fake)
        print(
            f"Hermes request: {len(body['messages'])} messages, {len(body.get('tools') or [])} tools, "
            f"{len(json.dumps(body)):,} bytes"
        )

        _config(home, fake.base_url, plugin=True)
        from hermes_cli.middleware import apply_llm_request_middleware  # type: ignore[import-not-found]
        from hermes_cli.plugins import discover_plugins, get_plugin_manager, get_pre_tool_call_directive  # type: ignore[import-not-found]

        started = time.perf_counter()
        discover_plugins()
        manager = get_plugin_manager()
        loaded = manager._plugins.get("kindling")
        if loaded is None or not loaded.enabled:
            sys.exit(f"Hermes did not load the kindling plugin: {getattr(loaded, 'error', 'not found')}")
        load_ms = (time.perf_counter() - started) * 1000
        middleware = dict(manager._middleware)
        hooks = dict(manager._hooks)

        http = httpx.Client(base_url=fake.base_url, timeout=30)

        def call(payload: dict[str, Any]) -> float:
            begin = time.perf_counter()
            response = http.post("/chat/completions", json=payload)
            response.read()
            fake.requests.clear()
            return time.perf_counter() - begin

        def through_middleware(session: str, count: int) -> tuple[dict[str, Any], float]:
            begin = time.perf_counter()
            result = apply_llm_request_middleware(
                body, session_id=session, platform="cli", api_call_count=count, model="fake-model"
            )
            return result.payload, time.perf_counter() - begin

        # The very first warm-up in this process: imports, template store, index, selection, build.
        first_payload, cold = through_middleware("cold-session", 1)
        added = len(first_payload["messages"]) - len(body["messages"])
        if added <= 0:
            sys.exit("The plugin did not warm the request; nothing to measure.")
        for _ in range(5):  # warm the HTTP connection and caches before timing
            call(body)

        warmer = middleware["llm_request"][0]
        base, plugin_mw, plugin_call, first_calls, hook_on, hook_off, own = [], [], [], [], [], [], []
        for i in range(calls):
            for with_plugin in (i % 2 == 0, i % 2 == 1):  # alternate which variant goes first
                if with_plugin:
                    manager._middleware = middleware
                    payload, spent = through_middleware("steady-session", i + 2)
                    plugin_mw.append(spent)
                    plugin_call.append(spent + call(payload))
                else:
                    manager._middleware = {}
                    base.append(call(body))
            manager._middleware = middleware
            begin = time.perf_counter()
            warmer(request=body, session_id="steady-session")
            own.append(time.perf_counter() - begin)
            if i % 4 == 0:  # a new session's first call (fewer: each one records a template use)
                first_calls.append(through_middleware(f"fresh-{i}", 1)[1])
            for enabled, bucket in ((True, hook_on), (False, hook_off)):
                manager._hooks = hooks if enabled else {}
                begin = time.perf_counter()
                get_pre_tool_call_directive(
                    "terminal", {"command": "pytest -q tests/"}, session_id="steady-session"
                )
                bucket.append(time.perf_counter() - begin)
            manager._hooks = hooks
        http.close()
    fake.stop()

    call_ms = _median_ms(base)
    rows = [
        ("the call through the fake server (baseline)", call_ms),
        ("plugin middleware per call after the first", _median_ms(plugin_mw)),
        ("  of which kindling's own callback", _median_ms(own)),
        ("the call with the plugin, middleware included", _median_ms(plugin_call)),
        ("  added per call", _median_ms(plugin_call) - call_ms),
        ("pre_tool_call hook, ordinary command (added)", _median_ms(hook_on) - _median_ms(hook_off)),
        ("warm-up on a session's first call (median)", _median_ms(first_calls)),
        ("warm-up on the process's first session (once)", cold * 1000),
        ("Hermes's plugin discovery, kindling included (once)", load_ms),
    ]
    print(f"{calls} calls of each; warm-up adds {added} messages to the request")
    width = max(len(name) for name, _ in rows)
    for name, ms in rows:
        print(f"{name:<{width}}  {ms:9.3f} ms  {ms / call_ms:7.3f}x the call")
    print(
        f"Per call after the first the plugin costs {(_median_ms(plugin_call) - call_ms) / call_ms:.1%} of the "
        f"call; the warm-up's one-time cost is {_median_ms(first_calls) / call_ms:.1f}x one call."
    )


if __name__ == "__main__":
    main()
