"""The proxy as a real subprocess (``python -m kindling proxy``): SIGKILL mid-stream, then the CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text, tool_call
from kindling.cli.main import app
from kindling.sessions import iter_sessions
from proxy_support import TOOLS, wait_recorded
from test_confirm_support import SRC, free_port


class ProxyProcess:
    """``kindling proxy`` in a subprocess on a free port."""

    def __init__(self, upstream: str, db: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        command = [
            sys.executable,
            "-m",
            "kindling",
            "proxy",
            "--upstream",
            upstream,
            "--port",
            str(self.port),
        ]
        command += ["--db", str(db), "--no-warm", "--log-level", "warning"]
        self.proc = subprocess.Popen(
            command, env={**os.environ, "PYTHONPATH": str(SRC)}, stdout=subprocess.DEVNULL, stderr=self._log
        )
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                self._log.seek(0)
                raise RuntimeError(f"proxy exited {self.proc.returncode}: {self._log.read()[-2000:]!r}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/kindling/status", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("proxy did not start")
            time.sleep(0.05)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def test_sigkill_mid_stream_loses_no_earlier_message(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    db = tmp_path / "proxy.db"
    hold = threading.Event()
    fake_openai.script = [
        tool_call("read_file", {"path": "notes.txt"}, "call_k_1"),
        {**text("The notes say to ship on Friday, after the tests pass."), "hold": hold},
        text("The notes say to ship on Friday, after the tests pass."),
    ]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What do my notes say?"},
    ]
    proxy = ProxyProcess(fake_openai.base_url, db)
    try:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-x", max_retries=0)
        reply = client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)
        messages += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": "call_k_1", "content": "ship on Friday after the tests pass"},
        ]
        stream = client.chat.completions.create(
            model="fake-model", messages=messages, tools=TOOLS, stream=True
        )
        first = next(iter(stream))
        assert first.choices[0].delta.role == "assistant"  # the stream is open, the rest held upstream
        wait_recorded(proxy.base_url)
        proxy.kill()
        assert proxy.proc.returncode == -signal.SIGKILL
    finally:
        hold.set()
        if proxy.proc.poll() is None:
            proxy.kill()
    (session,) = list(iter_sessions(db))
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool"]
    assert session.messages[2].tool_calls[0].id == "call_k_1"

    # A restarted proxy recognises the conversation when the client retries: nothing twice.
    restarted = ProxyProcess(fake_openai.base_url, db)
    try:
        client = openai.OpenAI(base_url=restarted.base_url, api_key="sk-x", max_retries=0)
        stream = client.chat.completions.create(
            model="fake-model", messages=messages, tools=TOOLS, stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream).startswith("The notes say")
        wait_recorded(restarted.base_url)
    finally:
        restarted.kill()
    (session,) = list(iter_sessions(db))
    assert [m.role for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]


def test_cli_path_and_refusals(tmp_path: Path) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["proxy", "path", "--json"])
    assert shown.exit_code == 0 and shown.stdout.strip().endswith('proxy.db"\n}'.strip())
    refused = runner.invoke(app, ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--host", "0.0.0.0"])
    assert refused.exit_code != 0 and "without a token" in refused.output
    missing = runner.invoke(app, ["proxy"])
    assert missing.exit_code != 0 and "--upstream is required" in missing.output
    bad = runner.invoke(app, ["proxy", "--upstream", "ftp://x"])
    assert bad.exit_code != 0 and "http:// or https://" in bad.output
