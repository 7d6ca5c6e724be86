"""One way in: the CLI, the Hermes plugin, the proxy and MCP ``warm_session`` all warm through ``warm()``.

The same task and the same tools through each door give the same warm messages, compared whole
(examples, requests, results, and whatever else a warm-up shows). Each door is the real thing: the
CLI's command, the real Hermes Agent running the plugin against a fake model server on loopback,
the proxy on loopback driven by the official ``openai`` client, and ``kindling mcp`` driven by the
official MCP client over stdio. A template of another tenant that fits the task better than any
other is in the same store: no local door (nor the proxy's default tenant) ever chooses it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import openai
import pytest
from mcp import Client, StdioServerParameters
from typer.testing import CliRunner

from fake_openai import FakeOpenAI, text
from kindling.cli.main import app
from kindling.mining.model import Example
from kindling.sessions import generate_sample_db
from kindling.templates import build_template
from kindling.templates.model import Episode, EpisodeStep, Template
from kindling.templates.store import DEFAULT_TENANT, TenantTemplates, open_store
from kindling.warmup import warm
from proxy_support import running_proxy
from test_hermes_plugin import run_hermes, write_config

TASK = "Refactor app/payments.py so the retry logic is not duplicated, then run the tests"
PRIVATE = "acme-private-result"


def _other_tenants_template() -> Template:
    """A template of tenant ``acme`` whose past tasks are this very task: it fits best of all."""
    examples: list[Example] = []
    episodes: list[Episode] = []
    for number in range(3):
        session = f"acme-{number}"
        steps = []
        for position, tool in enumerate(("read_file", "patch", "terminal"), start=1):
            examples.append(
                Example(
                    tool_name=tool,
                    context=TASK,
                    arguments={"path": f"app/payments_{number}.py"},
                    result=f"{PRIVATE} {number}",
                    session_id=session,
                    position=position,
                )
            )
            steps.append(EpisodeStep(tool_name=tool, position=position))
        episodes.append(Episode(session_id=session, opening=TASK, steps=steps))
    return Template(name="proxy-acme", tenant="acme", examples=examples, episodes=episodes)


def _hermes_door(fake: FakeOpenAI, hermes_home: Path, kindling_home: Path) -> tuple[list[Any], list[Any]]:
    """The warm messages the real Hermes sent upstream, and the tools it offered."""
    write_config(hermes_home, fake)
    fake.script = [text("Done.")]
    run_hermes(hermes_home, kindling_home, TASK, "terminal,file")
    request = fake.chat_requests()[0]
    messages = request["messages"]
    user = next(i for i, m in enumerate(messages) if m["role"] == "user" and m["content"] == TASK)
    return messages[1:user], request["tools"]


def _proxy_door(fake: FakeOpenAI, tools: list[Any], db: Path) -> list[Any]:
    """The warm messages the proxy put before the conversation, seen by the upstream."""
    fake.requests.clear()
    fake.script = [text("Done.")]
    with running_proxy(fake.base_url, db) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-client", max_retries=0)
        client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": TASK}], tools=tools
        )
    messages = fake.chat_requests()[0]["messages"]
    assert messages[-1] == {"role": "user", "content": TASK}
    return list(messages[:-1])


def _mcp_door(names: list[str]) -> dict[str, Any]:
    """What ``warm_session`` answers the official MCP client over stdio."""
    kindling = str(Path(sys.executable).with_name("kindling"))
    env = {"KINDLING_HOME": os.environ["KINDLING_HOME"], "HERMES_HOME": os.environ["HERMES_HOME"]}
    params = StdioServerParameters(command=kindling, args=["mcp"], env=env)
    answer: dict[str, Any] = {}

    async def main() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            called = await client.call_tool("warm_session", {"action": "load", "task": TASK, "tools": names})
            assert not called.is_error, called.content
            assert called.structured_content is not None
            answer.update(called.structured_content)

    anyio.run(main)
    return answer


def test_every_door_warms_the_same_task_and_tools_the_same_way(
    fake_openai: FakeOpenAI, isolated_homes: Path
) -> None:
    hermes_home, kindling_home = isolated_homes / "hermes", isolated_homes / "kindling"
    source = generate_sample_db(isolated_homes / "state.db", sessions=30, seed=3)
    build_template("coding", [source], min_messages=5)
    store = open_store()
    store.save(_other_tenants_template())

    hermes, tools = _hermes_door(fake_openai, hermes_home, kindling_home)
    names = sorted(t["function"]["name"] for t in tools)
    assert {"terminal", "read_file", "patch"} <= set(names) and "web_search" not in names
    # Without the tenant's view, the other tenant's template is the better fit: the test can fail.
    assert warm(None, TASK, store=store, record_use=False, tools=names).template.name == "proxy-acme"
    expected = warm(None, TASK, store=TenantTemplates(store, DEFAULT_TENANT), record_use=False, tools=names)
    assert expected.template.name == "coding" and expected.tools and set(expected.tools) <= set(names)

    cli = CliRunner().invoke(
        app, ["warm", "--task", TASK, "--tools", ",".join(names), "--json", "--no-record"]
    )
    assert cli.exit_code == 0, cli.output
    cli_data = json.loads(cli.output)
    mcp = _mcp_door(names)
    proxy = _proxy_door(fake_openai, tools, isolated_homes / "proxy.db")

    assert cli_data["template"] == mcp["template"] == "coding"
    assert cli_data["messages"] == expected.messages
    assert hermes == expected.messages
    assert proxy == expected.messages
    assert mcp["messages"] == expected.messages
    # Nothing of the other tenant's reached any door.
    for door in (cli_data["messages"], hermes, proxy, mcp["messages"]):
        assert PRIVATE not in json.dumps(door)


def test_local_doors_never_choose_another_tenants_template_however_well_it_fits(
    isolated_homes: Path,
) -> None:
    store = open_store()
    store.save(_other_tenants_template())
    # Alone in the store, the other tenant's template is no template at all for the local doors.
    cli = CliRunner().invoke(app, ["warm", "--auto", "--task", TASK, "--no-record"])
    assert cli.exit_code != 0 and PRIVATE not in cli.output
    piped = CliRunner().invoke(
        app, ["inject", "--auto", "--no-record"], input=json.dumps([{"role": "user", "content": TASK}])
    )
    assert piped.exit_code != 0 and PRIVATE not in piped.output
    from kindling.integrations.hermes import SessionWarmer
    from kindling.integrations.hermes_settings import PluginSettings

    assert SessionWarmer(PluginSettings()).warm_messages(TASK, {"read_file", "patch", "terminal"}) == []
    from kindling.integrations.warm_tool import warm_session

    answer = json.loads(warm_session({"action": "load", "task": TASK}))
    assert answer["success"] is False and PRIVATE not in json.dumps(answer)
    # Shared by an admin, it is every tenant's to use.
    store.save(_other_tenants_template().model_copy(update={"shared": True}))
    cli = CliRunner().invoke(app, ["warm", "--auto", "--task", TASK, "--no-record", "--json"])
    assert cli.exit_code == 0 and json.loads(cli.output)["template"] == "proxy-acme"
    # Named, a template is the caller's choice (the CLI is the store's owner).
    named = CliRunner().invoke(app, ["warm", "proxy-acme", "--task", TASK, "--no-record", "--json"])
    assert named.exit_code == 0


@pytest.mark.parametrize("tools", [["web_search"], ["read_file", "patch", "terminal"]])
def test_auto_choice_considers_only_templates_with_an_example_of_the_agents_tools(
    isolated_homes: Path, tools: list[str]
) -> None:
    store = open_store()
    store.save(_other_tenants_template().model_copy(update={"tenant": None, "name": "payments"}))
    store.save(
        Template(
            name="search",
            examples=[Example(tool_name="web_search", context="search the web", result="3 pages")],
        )
    )
    result = warm(None, TASK, store=store, record_use=False, tools=tools)
    assert result.template.name == ("search" if tools == ["web_search"] else "payments")
    assert set(result.tools) <= set(tools)
