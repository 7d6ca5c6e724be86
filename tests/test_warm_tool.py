"""The agent-facing warm_session tool: every action, and errors as JSON instead of exceptions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kindling.config import templates_dir
from kindling.integrations.warm_tool import WARM_SESSION_SCHEMA, warm_session
from kindling.mining.model import Example
from kindling.sessions import generate_sample_db
from kindling.templates import Template, open_store
from kindling.warmup import validate_conversation


def call(**args: Any) -> dict[str, Any]:
    result = json.loads(warm_session(args))
    assert isinstance(result["success"], bool)
    return result  # type: ignore[no-any-return]


@pytest.fixture
def sample_db(tmp_path: Path) -> Path:
    return generate_sample_db(tmp_path / "state.db", sessions=60, seed=5)


def test_schema_lists_every_action() -> None:
    assert WARM_SESSION_SCHEMA["name"] == "warm_session"
    params = WARM_SESSION_SCHEMA["parameters"]
    assert params["properties"]["action"]["enum"] == ["build", "list", "load", "delete", "inject"]
    assert params["required"] == ["action"]
    for key in ("name", "description", "min_messages", "max_sessions", "source_filter", "tags"):
        assert key in params["properties"]


def test_build_list_load_inject_delete(sample_db: Path) -> None:
    built = call(
        action="build", name="coding", description="from the sample", tags=["demo"], sources=[str(sample_db)]
    )
    assert built["success"], built
    assert built["template"]["name"] == "coding"
    assert built["template"]["tags"] == ["demo"]
    assert built["read"]["sessions"] == 60

    listed = call(action="list")
    assert [t["name"] for t in listed["templates"]] == ["coding"]

    loaded = call(action="load", name="coding", task="fix the parser test", budget=700)
    assert loaded["success"], loaded
    validate_conversation(loaded["messages"], strict_ids=True)
    assert 0 < loaded["estimated_tokens"] <= 700
    assert loaded["preview"].count("\n") >= 1
    assert any(line.startswith("- ") for line in loaded["preview"].splitlines())

    conversation = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "search the web for bm25"},
    ]
    injected = call(action="inject", messages=conversation)  # no name: chosen automatically
    assert injected["success"], injected
    assert injected["messages"][0] == conversation[0]
    assert injected["messages"][-1] == conversation[-1]
    assert injected["injected"] == len(injected["messages"]) - 2
    assert open_store().get("coding").usage_count == 2

    assert call(action="delete", name="coding")["success"]
    assert call(action="list")["templates"] == []


def test_auto_load_and_inject_report_templates_they_had_to_skip(sample_db: Path) -> None:
    assert call(action="build", name="coding", sources=[str(sample_db)])["success"]
    (templates_dir() / "broken.json").write_text('{"name": "broken", "examples": [')
    for args in (
        {"action": "load", "task": "run the tests"},
        {"action": "inject", "messages": [{"role": "user", "content": "run the tests"}]},
    ):
        result = call(**args)
        assert result["success"], result
        assert result["template"] == "coding"
        assert [Path(p["location"]).name for p in result["problems"]] == ["broken.json"]
        assert "not valid JSON" in result["problems"][0]["reason"]


def test_build_checks_the_store_before_reading_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_store = tmp_path / "plain.txt"
    not_a_store.write_text("x")
    monkeypatch.setenv("KINDLING_TEMPLATE_STORE", str(not_a_store))
    result = call(action="build", name="x", sources=[str(tmp_path / "missing.db")])
    assert not result["success"]
    assert "is a file; a template store is a directory" in result["error"]


def test_build_filters_reach_mining(sample_db: Path) -> None:
    few = call(action="build", name="few", sources=[str(sample_db)], max_sessions=5, min_messages=0)
    assert few["success"], few
    assert few["mining"]["sessions_mined"] == 5
    none = call(action="build", name="none", sources=[str(sample_db)], source_filter="no-such-platform")
    assert not none["success"]
    assert "No examples" in none["error"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"action": "explode"}, "action must be one of"),
        ({}, "action must be one of"),
        ({"action": "build"}, "name is required"),
        ({"action": "build", "name": "../x", "sources": ["/nonexistent"]}, "letters, digits"),
        ({"action": "build", "name": "x", "min_messages": -1}, "0 or more"),
        # Checked before any source is opened (this one does not exist).
        (
            {"action": "build", "name": "x", "task_type": "cooking", "sources": ["/nonexistent"]},
            "task_type must be one of",
        ),
        ({"action": "build", "name": "x", "tags": "a" * 3, "sources": 5}, "list of strings"),
        (
            {"action": "build", "name": "x", "sources": ["postgresql://postgres@127.0.0.1:5432/postgres"]},
            "not database URLs",
        ),
        ({"action": "load", "name": "missing"}, "does not exist"),
        ({"action": "load"}, "No template"),
        ({"action": "delete", "name": "missing"}, "does not exist"),
        ({"action": "inject", "messages": "hello"}, "list of OpenAI-format messages"),
        ({"action": "load", "name": "x", "budget": "lots"}, "whole number"),
    ],
)
def test_errors_come_back_as_json(args: dict[str, Any], message: str) -> None:
    result = call(**args)
    assert result["success"] is False
    assert message in result["error"]


def test_non_dict_arguments() -> None:
    assert json.loads(warm_session("build"))["success"] is False  # type: ignore[arg-type]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
message_like = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool", "robot"])},
    optional={
        "content": json_values,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "id": st.text(max_size=6) | st.integers(),
                    "function": st.fixed_dictionaries(
                        {}, optional={"name": json_values, "arguments": json_values}
                    )
                    | json_values,
                },
            )
            | json_values,
            max_size=2,
        ),
        "tool_call_id": json_values,
    },
)
plain_message = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["system", "user", "assistant"]),
    st.text(max_size=40),
)
tool_args = st.fixed_dictionaries(
    {"action": st.sampled_from(["inject", "load", "list", "delete", "build", "explode"])},
    optional={
        "name": st.sampled_from(["fuzz", "../x", "", "missing"]) | json_values,
        "task": st.text(max_size=40) | json_values,
        "budget": st.integers(-5, 5000) | json_values,
        "style": st.sampled_from(["triples", "closed"]) | json_values,
        "messages": st.lists(plain_message | message_like, max_size=4) | json_values,
        "description": json_values,
        "min_messages": json_values,
        "max_sessions": json_values,
        "source_filter": json_values,
        "tags": json_values,
        "task_type": st.sampled_from(["code", "cooking"]) | json_values,
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=tool_args)
def test_any_arguments_get_a_json_answer_never_an_exception(args: dict[str, Any]) -> None:
    store = open_store()
    if not store.exists("fuzz"):
        store.save(Template(name="fuzz", examples=[Example(tool_name="terminal", context="run tests")]))
    if args.get("action") == "build":
        args = {**args, "sources": ["/nonexistent/state.db"]}  # never mine whatever the text names
    result = json.loads(warm_session(args))
    assert isinstance(result["success"], bool)
    if result["success"]:
        if args["action"] in ("load", "inject"):
            validate_conversation(result["messages"])
    else:
        assert isinstance(result["error"], str) and result["error"]
