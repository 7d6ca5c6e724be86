"""kindling.eval's parts: the split, replay preparation, schemas, scoring, the bootstrap, the results file,
and the warm-up the proxy would insert."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from eval_support import write_sessions
from kindling.errors import ConfigError, StoreError
from kindling.eval import EvalOptions, plan_eval
from kindling.eval.bootstrap import paired_bootstrap
from kindling.eval.cache import ResultsCache, request_key
from kindling.eval.replay import cases_of, prepare_session, recorded_calls
from kindling.eval.score import (
    CALL,
    FAILED,
    FailureIndex,
    ModelCall,
    argument_shape,
    error_class,
    normalise,
    score_answer,
)
from kindling.eval.split import split_by_task, task_groups
from kindling.eval.tools import ToolCatalog, infer_schema
from kindling.eval.warming import LoadedTemplates, warm_block, with_block
from kindling.mining.model import OutcomeStatus
from kindling.mining.outcome import default_classifier
from kindling.mining.patterns import personal_data_scrubber
from kindling.sessions.model import Message, Session, ToolCall
from kindling.templates.build import template_from_sessions
from kindling.templates.store import JsonDirStore


def _session(sid: str, request: str, *, task_id: str | None = None, reward: float | None = None) -> Session:
    metadata = {"task_id": task_id, "benchmark": "tau2-bench"} if task_id else {}
    return Session(sid, "test", (Message("user", request),), reward=reward, metadata=metadata)


# ------------------------------------------------------------------------------------------ split


def test_same_task_id_and_near_duplicate_requests_share_a_group() -> None:
    sessions = [
        _session("a", "Cancel my order of the red shoes", task_id="7"),
        _session("b", "Something else entirely, nothing alike", task_id="7"),
        _session("c", "please cancel my order of the red shoes now"),
        _session("d", "What is the weather in Oslo"),
        _session("e", "Book a table for two in Rome tonight"),
    ]
    groups = task_groups(sessions, threshold=0.6)
    assert groups[0] == groups[1] == groups[2]  # one id; then a near-duplicate of the first
    assert len({groups[0], groups[3], groups[4]}) == 3


def test_similarity_join_finds_every_pair_a_brute_force_finds() -> None:
    rng = random.Random(4)
    vocabulary = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.sample(vocabulary, rng.randint(3, 9))) for _ in range(150)]
    sessions = [_session(str(i), text) for i, text in enumerate(texts)]
    groups = task_groups(sessions, threshold=0.5)
    words = [set(text.split()) for text in texts]
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if len(words[i] & words[j]) / len(words[i] | words[j]) >= 0.5:
                assert groups[i] == groups[j], (texts[i], texts[j])


def test_split_keeps_every_task_in_one_fold_and_balances_the_folds(tmp_path: Path) -> None:
    from kindling.sessions import iter_sessions

    sessions = list(iter_sessions(write_sessions(tmp_path / "s.jsonl")))
    split = split_by_task(sessions, folds=5, seed=3)
    fold_of_task: dict[int, set[int]] = {}
    for group, fold in zip(split.group, split.fold, strict=True):
        fold_of_task.setdefault(group, set()).add(fold)
    assert all(len(folds) == 1 for folds in fold_of_task.values())
    sizes = [split.fold.count(f) for f in range(5)]
    assert max(sizes) - min(sizes) <= 3, sizes
    assert split_by_task(sessions, folds=5, seed=3) == split
    with pytest.raises(ValueError):
        split_by_task(sessions, folds=1)


# ----------------------------------------------------------------------------------------- replay


def _tau2_like() -> Session:
    return Session(
        "s1",
        "tau2-bench",
        (
            Message("system", "You are an agent. Secret: sk-abcdefghijklmnopqrstuvwx1234"),
            Message("assistant", "Hi! How can I help?"),
            Message("user", "My email is jane.doe@example.com, find my account."),
            Message("assistant", None, (ToolCall("u1", "toggle_data", {}, requestor="user"),)),
            Message("tool", "data on", tool_call_id="u1"),
            Message(
                "assistant",
                None,
                (ToolCall("c1", "find_user_id_by_email", {"email": "jane.doe@example.com"}),),
            ),
            Message("tool", "jane_doe_123", tool_call_id="c1"),
            Message("assistant", None, (ToolCall("c2", "get_user_details", {"user_id": "jane_doe_124"}),)),
            Message("tool", "Error: user not found", tool_call_id="c2"),
            Message("assistant", None, (ToolCall("c3", "get_user_details", {"user_id": "jane_doe_123"}),)),
            Message("tool", '{"user_id": "jane_doe_123", "orders": ["#W1234567"]}', tool_call_id="c3"),
            Message("assistant", "Found you."),
        ),
        reward=1.0,
    )


def test_prepare_hides_credentials_and_personal_data_and_leaves_out_the_users_calls() -> None:
    scrubber = personal_data_scrubber()
    from kindling.mining.config import load_mining_config
    from kindling.mining.redact import SecretRedactor

    redactor = SecretRedactor(load_mining_config().secrets())
    prepared = prepare_session(_tau2_like(), default_classifier(), redactor=redactor, scrubber=scrubber)
    sent = json.dumps(prepared.messages)
    assert "jane.doe@example.com" not in sent and "jane_doe_123" not in sent
    assert "sk-abcdefghijklmnopqrstuvwx1234" not in sent
    assert "toggle_data" not in sent and "data on" not in sent
    assert prepared.dropped == {"user_tool_call": 1, "user_tool_result": 1, "empty_message": 1}
    # Ids are provider-safe, and the recorded calls read the same placeholders the messages do.
    ids = [c["id"] for m in prepared.messages for c in m.get("tool_calls", [])]
    assert ids == ["call_1", "call_2", "call_3"]
    email = prepared.calls[0].arguments["email"]
    assert email.startswith("<email_") and email in prepared.messages[2]["content"]
    assert [c.status for c in prepared.calls] == [OutcomeStatus.OK, OutcomeStatus.FAILED, OutcomeStatus.OK]
    assert prepared.calls[1].error_class == "user not found"


def test_cases_are_the_first_steps_that_worked_and_the_calls_that_failed() -> None:
    prepared = prepare_session(_tau2_like(), default_classifier())
    skipped: dict[str, int] = {}
    cases = cases_of(prepared, source=0, fold=1, group=2, steps=3, skipped=skipped)
    assert [(c.kind, c.tool) for c in cases] == [
        (CALL, "find_user_id_by_email"),
        (FAILED, "get_user_details"),
        (CALL, "get_user_details"),
    ]
    # Each case's conversation ends just before its step.
    assert cases[0].messages[-1]["role"] == "user"
    assert cases[2].messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_2",
        "content": "Error: user not found",
    }
    assert len(cases_of(prepared, source=0, fold=1, group=2, steps=1, skipped=skipped)) == 2
    # A session that failed gives only its failed calls.
    lost = prepare_session(Session("x", "t", _tau2_like().messages, reward=0.0), default_classifier())
    assert [c.kind for c in cases_of(lost, source=0, fold=0, group=0, steps=3, skipped={})] == [FAILED]


def test_light_calls_read_the_same_as_the_prepared_ones() -> None:
    scrubber = personal_data_scrubber()
    light = recorded_calls(_tau2_like(), default_classifier(), scrubber=scrubber)
    full = prepare_session(_tau2_like(), default_classifier(), scrubber=scrubber).calls
    assert [(c.name, c.status, argument_shape(c.arguments)) for c in light] == [
        (c.name, c.status, argument_shape(c.arguments)) for c in full
    ]


# ------------------------------------------------------------------------------ schemas and scores


def test_inferred_schema_requires_what_every_call_gave_and_allows_nothing_else() -> None:
    schema = infer_schema([{"city": "Oslo", "days": 3}, {"city": "Rome", "days": 2.5, "units": "c"}])
    assert schema == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "number"}, "units": {"type": "string"}},
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    catalog = ToolCatalog.infer({"forecast": [{"city": "Oslo", "days": 3}]}, ["forecast", "ping"])
    assert catalog.check("forecast", {"city": "Oslo", "days": 1})
    assert not catalog.check("forecast", {"city": "Oslo"})
    assert not catalog.check("forecast", {"city": "Oslo", "days": 1, "extra": 1})
    assert not catalog.check("forecast", "not an object")
    assert not catalog.check("unknown", {})
    assert catalog.schemas["ping"] is None and catalog.check("ping", {"anything": 1})  # no schema


def test_recorded_definitions_win_over_inference() -> None:
    definition = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "required": ["x"]}},
    }
    catalog = ToolCatalog.infer({"f": [{"y": 1}]}, ["f"], [definition])
    assert catalog.defined == {"f"} and catalog.required("f") == ["x"]
    assert catalog.definitions()[0]["function"]["parameters"] == {"type": "object", "required": ["x"]}


def test_error_classes_and_shapes_blank_the_values() -> None:
    assert error_class("Error: order #W1234567 not found") == error_class("Error: order #W7654321 not found")
    assert error_class("Error: order #W1234567 not found") == "order <id> not found"
    assert error_class("") == "empty result"
    assert error_class("Error: user <user_id_2> is 'blocked'\nmore") == "user <user_id> is <value>"
    assert argument_shape({"order_id": "#W123", "n": 2}) == "{n:n,order_id:s:#a9}"
    assert argument_shape({"order_id": "<order_id_3>"}) == "{order_id:s:<order_id>}"
    assert normalise({"a": " Oslo  Town", "b": "5", "c": [1]}) == {"a": "oslo town", "b": 5.0, "c": [1.0]}


def _catalog() -> ToolCatalog:
    return ToolCatalog.infer(
        {"get_order": [{"order_id": "#W1"}], "convert": [{"amount": 5, "note": "x"}, {"amount": 7}]},
        ["get_order", "convert"],
    )


def test_a_call_step_is_scored_on_tool_arguments_and_known_failures() -> None:
    failures = FailureIndex.from_calls([])
    expected = (("get_order", {"order_id": "#W1"}),)
    right = score_answer(
        CALL, expected, None, ModelCall("get_order", '{"order_id": " #w1 "}'), _catalog(), failures
    )
    assert right == {
        "right_tool": True,
        "valid_arguments": True,
        "key_arguments": True,
        "known_failure": False,
        "no_call": False,
        "right_call": True,
        "good": True,
    }
    wrong_value = score_answer(
        CALL, expected, None, ModelCall("get_order", '{"order_id": "#W2"}'), _catalog(), failures
    )
    assert wrong_value["right_tool"] and not wrong_value["key_arguments"] and not wrong_value["right_call"]
    broken = score_answer(CALL, expected, None, ModelCall("get_order", "{not json"), _catalog(), failures)
    assert broken["right_tool"] and not broken["valid_arguments"] and not broken["right_call"]
    other = score_answer(CALL, expected, None, ModelCall("convert", '{"amount": 1}'), _catalog(), failures)
    assert not other["right_tool"] and other["valid_arguments"] and not other["good"]
    silent = score_answer(CALL, expected, None, None, _catalog(), failures)
    assert silent["no_call"] and not silent["good"] and not silent["valid_arguments"]
    # Only the required arguments are key: an optional one may differ.
    optional = score_answer(
        CALL,
        (("convert", {"amount": 5, "note": "x"}),),
        None,
        ModelCall("convert", '{"amount": 5.0}'),
        _catalog(),
        failures,
    )
    assert optional["key_arguments"]


class _Call:
    def __init__(self, name: str, arguments: Any, status: OutcomeStatus, error: str | None = None) -> None:
        self.name, self.arguments, self.status, self.error_class = name, arguments, status, error


def test_known_failures_are_shapes_that_only_ever_failed() -> None:
    failures = FailureIndex.from_calls(
        [
            _Call("convert", {"amount": "five"}, OutcomeStatus.FAILED, "amount must be a number"),
            _Call("convert", {"amount": 5}, OutcomeStatus.OK),
            _Call("get_order", {"order_id": "#W9"}, OutcomeStatus.FAILED, "order <id> not found"),
            _Call("get_order", {"order_id": "#W1"}, OutcomeStatus.OK),
        ]
    )
    assert failures.match("convert", {"amount": "ten"}) == "amount must be a number"
    assert failures.match("convert", {"amount": 10}) is None
    assert failures.match("get_order", {"order_id": "#W2"}) is None  # this shape also worked
    assert failures.match("get_order", {"order_id": "#w9"}) == "order <id> not found"  # a repeat
    scores = score_answer(
        CALL,
        (("convert", {"amount": 5}),),
        None,
        ModelCall("convert", '{"amount": "ten"}'),
        _catalog(),
        failures,
    )
    assert scores["known_failure"] and not scores["right_call"]


def test_a_failed_call_is_avoided_unless_it_is_repeated_or_its_class_is_met() -> None:
    failures = FailureIndex.from_calls(
        [_Call("convert", {"amount": "five"}, OutcomeStatus.FAILED, "amount must be a number")]
    )
    failed = (("convert", {"amount": "lots"}),)
    error = "amount must be a number"

    def avoided(call: ModelCall | None) -> bool:
        return score_answer(FAILED, failed, error, call, _catalog(), failures)["avoids_failure"]

    assert not avoided(ModelCall("convert", '{"amount": "LOTS"}'))  # the same call again
    assert not avoided(ModelCall("convert", '{"amount": "many"}'))  # a known failure of that class
    assert avoided(ModelCall("convert", '{"amount": 12}'))
    assert avoided(ModelCall("get_order", '{"order_id": "#W1"}'))
    assert avoided(None)


# -------------------------------------------------------------------------------------- bootstrap


def test_identical_answers_give_a_zero_interval() -> None:
    interval = paired_bootstrap([1, 0, 1], [1, 0, 1], ["a", "b", "c"])
    assert interval is not None
    assert (interval.difference, interval.low, interval.high) == (0.0, 0.0, 0.0)
    assert interval.excludes_zero() == 0
    assert paired_bootstrap([], [], []) is None
    with pytest.raises(ValueError):
        paired_bootstrap([1], [1, 0], ["a"])


def test_the_interval_covers_the_true_difference_about_95_times_in_100() -> None:
    # Tasks of one to four steps; each step is right with 0.45 cold and 0.60 warm, and a task's
    # steps share a task effect, so resampling tasks (not steps) is what keeps the coverage.
    rng = np.random.default_rng(11)
    true = 0.15
    covered = 0
    widths = []
    runs = 300
    for run in range(runs):
        cold, warm, clusters = [], [], []
        for task in range(30):
            shift = rng.normal(0, 0.15)
            for _ in range(rng.integers(1, 5)):
                cold.append(float(rng.random() < np.clip(0.45 + shift, 0, 1)))
                warm.append(float(rng.random() < np.clip(0.60 + shift, 0, 1)))
                clusters.append(task)
        interval = paired_bootstrap(cold, warm, clusters, resamples=500, seed=run)
        assert interval is not None
        covered += interval.low <= true <= interval.high
        widths.append(interval.high - interval.low)
    assert 0.90 * runs <= covered <= 0.99 * runs, covered
    assert np.mean(widths) < 0.35


# ---------------------------------------------------------------------------------- results file


def test_results_file_survives_a_torn_line_and_later_answers_win(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    cache = ResultsCache(path)
    cache.put("k1", {"calls": [], "content": "a"})
    cache.put("k2", {"calls": [], "content": "b"})
    cache.close()
    with path.open("ab") as handle:
        handle.write(b'{"key": "k3", "answer": {"cont')  # what a kill in mid-write would leave
    again = ResultsCache(path)
    assert again.malformed == 1 and len(again) == 2 and again.get("k2") == {"calls": [], "content": "b"}
    again.put("k3", {"calls": [], "content": "c"})
    again.put("k1", {"calls": [], "content": "z"})
    again.close()
    last = ResultsCache(path)
    assert last.malformed == 1 and last.get("k3") == {"calls": [], "content": "c"}
    assert last.get("k1") == {"calls": [], "content": "z"}
    assert all(orjson.loads(line) for line in path.read_bytes().splitlines()[-2:])


def test_request_keys_follow_content_not_order(tmp_path: Path) -> None:
    assert request_key({"a": 1, "b": [1, 2]}) == request_key({"b": [1, 2], "a": 1})
    assert request_key({"a": 1}) != request_key({"a": 2})
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(StoreError):
        ResultsCache(tmp_path / "dir.jsonl")


# ------------------------------------------------------------------------------------ the warm-up


def test_the_warm_up_is_the_one_the_proxy_inserts(tmp_path: Path) -> None:
    from kindling.proxy.conversations import Conversations
    from kindling.sessions import iter_sessions

    sessions = list(iter_sessions(write_sessions(tmp_path / "s.jsonl")))
    store = JsonDirStore(tmp_path / "templates")
    store.save(template_from_sessions("travel", sessions[10:], min_messages=1))
    messages = [m.as_dict() for m in sessions[0].messages[:2]]
    tools = ["get_weather", "get_forecast", "find_restaurant"]
    block = warm_block(messages, tools, store=LoadedTemplates(store))
    assert block is not None and block.template == "travel"
    proxy = Conversations(None, templates=str(tmp_path / "templates"))  # type: ignore[arg-type]
    choice = proxy._warm_block(messages, tools, store=proxy._store())
    assert choice.block is not None and orjson.loads(choice.block) == block.messages
    warm = with_block(messages, block)
    assert warm[0] == messages[0] and warm[-1] == messages[-1] and warm[1:-1] == block.messages
    assert with_block(messages, None) == messages
    assert warm_block(messages, [], store=LoadedTemplates(store)) is None


def test_plan_options_are_checked_before_anything_is_read(tmp_path: Path) -> None:
    for options in (
        EvalOptions(folds=1),
        EvalOptions(steps=0),
        EvalOptions(similarity=0),
        EvalOptions(sessions=0),
    ):
        with pytest.raises(ConfigError):
            plan_eval([tmp_path / "missing.jsonl"], options)


def test_a_source_without_steps_says_so(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(
        json.dumps(
            {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
        )
        + "\n"
    )
    with pytest.raises(ConfigError, match="No step to replay in 1 sessions"):
        plan_eval([path], EvalOptions())


def test_tool_definitions_recorded_with_the_sessions_are_offered_as_they_are(tmp_path: Path) -> None:
    definition = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather now.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    source = write_sessions(tmp_path / "s.jsonl")
    records = [json.loads(line) for line in source.read_text().splitlines()]
    source.write_text("\n".join(json.dumps({**r, "tools": [definition]}) for r in records) + "\n")
    with plan_eval([source], EvalOptions(min_messages=1, sessions=3)) as plan:
        catalog = plan.catalogs[0]
        assert catalog.defined == {"get_weather"}
        assert catalog.schemas["get_weather"] == definition["function"]["parameters"]
        assert catalog.schemas["book_flight"] is not None  # the tools without a definition are inferred
        offered = {t["function"]["name"]: t["function"] for t in plan.cases[0].tools}
        assert offered["get_weather"]["parameters"]["required"] == ["city"]
