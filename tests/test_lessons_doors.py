"""Lessons through every way in: the real Hermes Agent keeps the warm bytes with lessons on, and each
door's switch (CLI ``--no-lessons``, MCP ``lessons``, ``KINDLING_HERMES_LESSONS``, the proxy's
``--no-lessons``) turns them off."""

from __future__ import annotations

import json
from pathlib import Path

import openai
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text, tool_call
from kindling.cli.main import app
from kindling.integrations.hermes import SessionWarmer
from kindling.integrations.hermes_settings import PluginSettings
from kindling.integrations.warm_tool import warm_session
from kindling.mining.lessons import LESSONS_INTRO
from kindling.mining.model import Example, Lesson, LessonCall, LessonPair
from kindling.templates.model import Template
from kindling.templates.store import open_store
from proxy_support import running_proxy
from test_hermes_plugin import run_hermes, write_config

TASK = "Run the unit tests for the parser"
OUTPUT = "tests/test_parser.py " + "." * 40 + "\n" + "\n".join(f"PASSED test_case_{i}" for i in range(30))


def save_template() -> Template:
    """A terminal example (long enough that a lesson fits in a quarter) and a lesson of terminal."""
    lesson = Lesson(
        tool_name="terminal",
        error_class="bash: line <id>: pytest: command not found",
        sessions=7,
        fixed=6,
        pairs=[
            LessonPair(
                failed=LessonCall(
                    tool_name="terminal", arguments={"command": "pytest -q"}, result="not found"
                ),
                fix=LessonCall(
                    tool_name="terminal", arguments={"command": "python -m pytest -q"}, result="ok"
                ),
                session_id="past-1",
                source="cli",
            )
        ],
    )
    template = Template(
        name="parser",
        examples=[
            Example(
                tool_name="terminal",
                context="Run the unit tests for the parser module",
                arguments={"command": "python -m pytest tests/test_parser.py -q"},
                result=OUTPUT,
                session_id="past-2",
            )
        ],
        lessons=[lesson],
    )
    return open_store().save(template)


def test_hermes_keeps_the_warm_bytes_with_lessons_on(fake_openai: FakeOpenAI, isolated_homes: Path) -> None:
    home, kindling_home = isolated_homes / "hermes", isolated_homes / "kindling"
    save_template()
    write_config(home, fake_openai)
    fake_openai.script = [tool_call("terminal", {"command": "echo checked"}), text("All tests pass.")]
    assert run_hermes(home, kindling_home, TASK, "terminal").strip() == "All tests pass."
    first, second = fake_openai.chat_requests()
    messages = first["messages"]
    real_user = next(i for i, m in enumerate(messages) if m["role"] == "user" and m["content"] == TASK)
    warm = messages[1:real_user]
    block = [m for m in warm if str(m.get("content") or "").startswith(LESSONS_INTRO)]
    assert len(block) == 1 and "python -m pytest -q" in block[0]["content"]
    assert warm[-1]["role"] == "assistant"
    # The second request (after the real tool call) carries the identical warm bytes in the same place.
    assert json.dumps(second["messages"][1:real_user]) == json.dumps(warm)
    assert second["messages"][real_user]["content"] == TASK


def test_every_door_turns_lessons_off(fake_openai: FakeOpenAI, isolated_homes: Path) -> None:
    save_template()
    on = CliRunner().invoke(app, ["warm", "parser", "--task", TASK, "--json", "--no-record"])
    off = CliRunner().invoke(app, ["warm", "parser", "--task", TASK, "--json", "--no-record", "--no-lessons"])
    assert on.exit_code == 0 and off.exit_code == 0, on.output + off.output
    assert json.loads(on.output)["lessons"][0]["sessions"] == 7 and LESSONS_INTRO in on.output
    assert json.loads(off.output)["lessons"] == [] and LESSONS_INTRO not in off.output
    conversation = json.dumps([{"role": "user", "content": TASK}])
    piped = CliRunner().invoke(app, ["inject", "parser", "--no-record", "--no-lessons"], input=conversation)
    assert piped.exit_code == 0 and LESSONS_INTRO not in piped.output and "PASSED" in piped.output

    loaded = json.loads(warm_session({"action": "load", "name": "parser", "task": TASK}))
    assert loaded["success"] and LESSONS_INTRO in json.dumps(loaded["messages"])
    plain = json.loads(warm_session({"action": "load", "name": "parser", "task": TASK, "lessons": False}))
    assert plain["success"] and plain["lessons"] == [] and LESSONS_INTRO not in json.dumps(plain["messages"])
    bad = json.loads(warm_session({"action": "load", "task": TASK, "lessons": "no"}))
    assert bad["success"] is False and "lessons" in bad["error"]

    assert LESSONS_INTRO in json.dumps(SessionWarmer(PluginSettings()).warm_messages(TASK, {"terminal"}))
    settings = PluginSettings.load({}, env={"KINDLING_HERMES_LESSONS": "0"})
    assert settings.lessons is False
    warmed = SessionWarmer(settings).warm_messages(TASK, {"terminal"})
    assert warmed and LESSONS_INTRO not in json.dumps(warmed)

    for lessons in (True, False):
        fake_openai.requests.clear()
        fake_openai.script = [text("Done.")]
        with running_proxy(
            fake_openai.base_url, isolated_homes / f"proxy-{lessons}.db", lessons=lessons
        ) as proxy:
            client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0)
            client.chat.completions.create(
                model="fake-model",
                messages=[{"role": "user", "content": TASK}],
                tools=[
                    {"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}
                ],
            )
        sent = json.dumps(fake_openai.chat_requests()[0]["messages"])
        assert "PASSED" in sent and (LESSONS_INTRO in sent) is lessons


def test_templates_show_lists_the_lessons() -> None:
    save_template()
    shown = CliRunner().invoke(app, ["templates", "show", "parser"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "lessons: 1" in shown.output and "pytest: command not found" in shown.output
    data = json.loads(CliRunner().invoke(app, ["templates", "show", "parser", "--json"]).output)
    assert data["lessons"][0]["pairs"][0]["fix"]["arguments"] == {"command": "python -m pytest -q"}


def test_lessons_from_the_proxys_record_carry_their_tenant_and_are_verified(
    fake_openai: FakeOpenAI, isolated_homes: Path
) -> None:
    from kindling.templates.store import JsonDirStore
    from proxy_support import wait_recorded
    from test_proxy_trust import _client, _converse, _tokens

    db, templates = isolated_homes / "proxy.db", isolated_homes / "templates"
    tokens = _tokens(db, "alice")
    with running_proxy(fake_openai.base_url, db, build_every=0) as proxy:
        client = _client(proxy.base_url, tokens["alice"])
        _converse(
            client,
            fake_openai,
            "Read the parser and fix it",
            [
                ("read_file", {"path": "parser.py"}, "call_a"),
                ("read_file", {"path": "src/parser.py"}, "call_b"),
            ],
            ["Error: File not found: parser.py", "def parse(): ..."],
        )
        wait_recorded(proxy.base_url, headers={"x-kindling-token": tokens["alice"]})
    built = CliRunner().invoke(
        app, ["build", "mine", str(db), "--tenant", "alice", "--json", "-s", str(templates)]
    )
    assert built.exit_code == 0, built.output
    template = JsonDirStore(templates).get("mine")
    (lesson,) = template.lessons
    assert (lesson.tool_name, lesson.error_class, lesson.sessions, lesson.fixed) == (
        "read_file",
        "file not found: <path>",
        1,
        1,
    )
    (pair,) = lesson.pairs
    assert (pair.tenant, pair.verified, pair.source) == ("alice", True, "proxy")
    assert pair.fix is not None and pair.fix.arguments == {"path": "src/parser.py"}
