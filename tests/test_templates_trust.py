"""Provenance you can see and sharing an admin decides: ``templates show --provenance``, ``warm --json``,
``templates share``, and what one tenant's view of the template store holds."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text
from kindling.cli.main import app
from kindling.errors import NotFoundError, StoreError
from kindling.mining.model import Example
from kindling.proxy.recorder import ProxyStore
from kindling.proxy.tenants import TenantTokens
from kindling.sessions.model import Message, Session, ToolCall
from kindling.templates import JsonDirStore, Template
from kindling.templates.build import template_from_sessions
from kindling.templates.model import Episode, EpisodeStep
from kindling.templates.store import TenantTemplates
from proxy_support import TOOLS, running_proxy


def _alice() -> Template:
    return Template(
        name="proxy-alice",
        tenant="alice",
        examples=[
            Example(
                tool_name="read_file",
                arguments={"path": "a.py"},
                context="Read a.py",
                result="A = 1",
                session_id="s-alice-1",
                source="proxy",
                tenant="alice",
                verified=True,
            ),
            Example(
                tool_name="terminal",
                arguments={"cmd": "pytest -q"},
                context="Run the parser tests",
                result="3 passed",
                session_id="s-alice-2",
                source="proxy",
                tenant="alice",
                verified=True,
            ),
        ],
        episodes=[
            Episode(
                session_id="s-alice-2",
                request="Run the parser tests",
                opening="Run the parser tests",
                source="proxy",
                tenant="alice",
                verified=True,
                steps=[EpisodeStep(tool_name="terminal", position=1)],
            ),
        ],
    )


def _hermes() -> Template:
    return Template(
        name="hermes-main",
        examples=[
            Example(
                tool_name="read_file",
                arguments={"path": "h.py"},
                context="Read h.py",
                session_id="h1",
                source="cli",
            )
        ],
    )


def test_show_provenance_and_warm_json_say_where_each_example_came_from(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path / "t")
    store.save(_alice())
    runner = CliRunner()
    shown = runner.invoke(
        app, ["templates", "show", "proxy-alice", "--provenance", "--json", "-s", str(tmp_path / "t")]
    )
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["tenant"] == "alice" and data["shared"] is False
    assert data["summary"]["by_tenant"] == {"alice": 3} and data["summary"]["verified"] == {"yes": 3}
    rows = {(r["kind"], r["session"]): r for r in data["provenance"]}
    assert rows[("example", "s-alice-1")] == {
        "kind": "example",
        "tool": "read_file",
        "request": "Read a.py",
        "source": "proxy",
        "session": "s-alice-1",
        "tenant": "alice",
        "verified": True,
    }
    assert rows[("past_task", "s-alice-2")]["tool"] == "terminal"
    table = runner.invoke(
        app, ["templates", "show", "proxy-alice", "--provenance", "-s", str(tmp_path / "t")]
    )
    assert table.exit_code == 0 and "s-alice-1" in table.output and "alice" in table.output

    warmed = runner.invoke(
        app,
        [
            "warm",
            "proxy-alice",
            "--task",
            "Run the parser tests",
            "--json",
            "--no-record",
            "-s",
            str(tmp_path / "t"),
        ],
    )
    assert warmed.exit_code == 0, warmed.output
    result = json.loads(warmed.stdout)
    calls = [c for m in result["messages"] for c in m.get("tool_calls") or ()]
    assert calls and len(result["provenance"]) == len(calls)
    assert all(p["found"] and p["tenant"] == "alice" and p["verified"] is True for p in result["provenance"])
    assert {p["session"] for p in result["provenance"]} <= {"s-alice-1", "s-alice-2"}


def test_a_tenant_sees_its_own_templates_and_the_shared_ones_only(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path / "t")
    store.save(_alice())
    store.save(_hermes())
    bob, alice, default = (TenantTemplates(store, t) for t in ("bob", "alice", "default"))
    assert [t.name for t in bob.list()] == []
    assert [t.name for t in alice.list()] == ["proxy-alice"]
    assert [t.name for t in default.list()] == ["hermes-main"]  # templates without a tenant are the default's
    with pytest.raises(NotFoundError, match="tenant 'bob'"):
        bob.get("proxy-alice")
    with pytest.raises(NotFoundError):
        bob.record_use("proxy-alice")
    with pytest.raises(StoreError):
        alice.save(_alice())

    runner = CliRunner()
    target = ["-s", str(tmp_path / "t")]
    # Asked, and told no: nothing is shared.
    declined = runner.invoke(app, ["templates", "share", "proxy-alice", *target], input="n\n")
    assert declined.exit_code != 0
    assert "2 examples and 1 past tasks from 2 sessions" in declined.output
    assert "alice 3" in declined.output and "> Run the parser tests" in declined.output
    assert not store.get("proxy-alice").shared
    scripted = runner.invoke(app, ["templates", "share", "proxy-alice", "--json", *target])
    assert scripted.exit_code != 0 and "--yes" in scripted.output and not store.get("proxy-alice").shared
    # Told yes: every tenant sees it (a new version, so what was shared stays on record).
    agreed = runner.invoke(app, ["templates", "share", "proxy-alice", *target], input="y\n")
    assert agreed.exit_code == 0, agreed.output
    assert store.get("proxy-alice").shared and store.versions("proxy-alice") == [1, 2]
    assert [t.name for t in TenantTemplates(store, "bob").list()] == ["proxy-alice"]
    unshared = runner.invoke(app, ["templates", "share", "proxy-alice", "--unshare", "--json", *target])
    assert unshared.exit_code == 0 and json.loads(unshared.stdout)["shared"] is False
    assert TenantTemplates(store, "bob").list() == []


def _session(session_id: str, path: str) -> Session:
    return Session(
        id=session_id,
        source="proxy",
        messages=(
            Message("user", f"Read {path}"),
            Message("assistant", None, (ToolCall(f"c-{session_id}", "read_file", {"path": path}),)),
            Message("tool", "contents", tool_call_id=f"c-{session_id}"),
            Message("assistant", "Done."),
        ),
        metadata={"tenant": "alice"},
    )


def test_a_rebuild_that_changes_a_shared_template_unshares_it(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path / "t")
    source = tmp_path / "chats.jsonl"

    def write(paths: list[str]) -> None:
        lines = [
            json.dumps({"messages": [m.as_dict() for m in _session(f"s{i}", p).messages]})
            for i, p in enumerate(paths)
        ]
        source.write_text("\n".join(lines) + "\n")

    write(["a.py"])
    runner = CliRunner()
    target = ["-s", str(tmp_path / "t")]
    assert runner.invoke(app, ["build", "common", str(source), "--min-messages", "1", *target]).exit_code == 0
    assert runner.invoke(app, ["templates", "share", "common", "--yes", *target]).exit_code == 0
    same = runner.invoke(app, ["build", "common", str(source), "--min-messages", "1", "--json", *target])
    assert json.loads(same.stdout)["unchanged"] is True and store.get("common").shared
    write(["a.py", "b.py"])
    changed = runner.invoke(app, ["build", "common", str(source), "--min-messages", "1", *target])
    assert changed.exit_code == 0, changed.output
    assert "share it again" in changed.output and not store.get("common").shared
    assert template_from_sessions("x", [_session("s9", "z.py")], min_messages=1).shared is False


def test_a_shared_template_warms_every_tenant_and_an_unshared_one_only_its_own(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    db, templates = tmp_path / "proxy.db", tmp_path / "t"
    store = JsonDirStore(templates)
    store.save(_alice())
    tokens = {tenant: TenantTokens(ProxyStore(db)).create(tenant)[1] for tenant in ("alice", "bob")}
    task = [{"role": "user", "content": "Run the parser tests"}]
    with running_proxy(fake_openai.base_url, db, templates=str(templates), build_every=0) as proxy:

        def first_request(tenant: str) -> list[dict[str, object]]:
            fake_openai.requests.clear()
            fake_openai.script = [text("ok")]
            client = openai.OpenAI(
                base_url=proxy.base_url,
                api_key="k",
                max_retries=0,
                default_headers={"X-Kindling-Token": tokens[tenant]},
            )
            client.chat.completions.create(model="fake-model", messages=task, tools=TOOLS)
            return fake_openai.chat_requests()[0]["messages"]

        assert len(first_request("alice")) > 1
        assert first_request("bob") == task
        assert (
            CliRunner()
            .invoke(app, ["templates", "share", "proxy-alice", "--yes", "-s", str(templates)])
            .exit_code
            == 0
        )
        proxy.app.state.conversations.templates_changed()
        assert len(first_request("bob")) > 1
