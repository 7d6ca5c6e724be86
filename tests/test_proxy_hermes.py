"""The real Hermes Agent 0.19.0 with its base URL pointed at the proxy (no plugin): recorded and warmed.

Hermes's agent loop always streams, so this is a real agent's streaming conversation with a tool call
and its result going through the proxy to the fake OpenAI-compatible server.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from fake_openai import FakeOpenAI, text, tool_call
from hermes_env import hermes_env, hermes_venv
from kindling.sessions import iter_sessions
from kindling.templates import JsonDirStore, Template
from kindling.templates.model import Example
from proxy_support import running_proxy, wait_recorded

TASK = "Run the unit tests for the parser"
MARKER = "kindling-proxy-example"


def test_hermes_through_the_proxy_is_recorded_once_and_warmed_with_the_same_bytes(
    fake_openai: FakeOpenAI, isolated_homes: Path, tmp_path: Path
) -> None:
    venv = hermes_venv()
    templates = tmp_path / "templates"
    JsonDirStore(templates).save(
        Template(
            name="parser",
            examples=[
                Example(
                    tool_name="terminal",
                    context="Run the unit tests for the parser module",
                    arguments={"command": "pytest tests/test_parser.py -q"},
                    result=f"12 passed ({MARKER})",
                )
            ],
        )
    )
    fake_openai.script = [tool_call("terminal", {"command": "echo checked"}), text("All tests pass.")]
    home = isolated_homes / "hermes"
    home.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "proxy.db"
    with running_proxy(fake_openai.base_url, db, templates=str(templates)) as proxy:
        config = ["model:", "  default: fake-model", "  provider: custom", f"  base_url: {proxy.base_url}"]
        (home / "config.yaml").write_text("\n".join([*config, "  api_key: sk-test"]) + "\n", encoding="utf-8")
        work = tmp_path / "work"
        work.mkdir()
        done = subprocess.run(
            [str(venv / "bin" / "hermes"), "-z", TASK, "-t", "terminal"],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=str(work),
            env=hermes_env(home),
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert done.stdout.strip() == "All tests pass."
        wait_recorded(proxy.base_url)

    # Upstream: the warm-up right after Hermes's system prompt, the same bytes on the second request.
    first, second = (r["raw"] for r in fake_openai.requests if r["path"].endswith("/chat/completions"))
    bodies = fake_openai.chat_requests()
    assert all(body.get("stream") for body in bodies)
    warm = bodies[0]["messages"][1:-1]
    assert bodies[0]["messages"][0]["role"] == "system" and MARKER in json.dumps(warm)
    block = json.dumps(warm, separators=(",", ":")).encode()[1:-1]
    assert (
        first.find(block) > 0
        and first[: first.find(block) + len(block)] == second[: first.find(block) + len(block)]
    )

    # The proxy's store: one session, Hermes's real messages, no warm-up.
    (session,) = iter_sessions(db)
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert session.messages[1].content == TASK
    assert session.messages[2].tool_calls[0].name == "terminal"
    assert "checked" in (session.messages[3].content or "")
    assert session.messages[4].content == "All tests pass."
    assert not any(MARKER in (m.content or "") for m in session.messages)
    # Hermes's own state.db holds no warm message either.
    with sqlite3.connect(home / "state.db") as state:
        contents = [content for (content,) in state.execute("SELECT content FROM messages")]
    assert contents and not any(MARKER in (c or "") for c in contents)
