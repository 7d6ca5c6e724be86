"""mine(): pairing by id, outcomes, de-duplication, every filter, ranking and the cap."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kindling.mining import OutcomeStatus, canonical_arguments, mine, mining_config_path, truncate
from kindling.sessions.model import Message, ReadReport, Session, ToolCall


def call(call_id: str, name: str, args: dict[str, object] | None = None, **kw: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=args or {}, **kw)  # type: ignore[arg-type]


def result(call_id: str | None, content: str | None, **kw: object) -> Message:
    return Message(role="tool", content=content, tool_call_id=call_id, **kw)  # type: ignore[arg-type]


def padded(messages: list[Message], total: int = 20) -> tuple[Message, ...]:
    """Pad with plain chat so a session reaches ``total`` messages (the default min_messages)."""
    filler = [Message(role="assistant", content="thinking")] * max(0, total - len(messages))
    return (*messages, *filler)


def session(sid: str, messages: list[Message], *, total: int = 20, **kw: object) -> Session:
    return Session(id=sid, source=str(kw.pop("source", "cli")), messages=padded(messages, total), **kw)  # type: ignore[arg-type]


def test_parallel_calls_pair_by_id_in_any_order() -> None:
    s = session(
        "s1",
        [
            Message(role="user", content="list and read"),
            Message(
                role="assistant",
                tool_calls=(
                    call("a", "terminal", {"command": "ls"}),
                    call("b", "read_file", {"path": "x.py"}),
                ),
            ),
            result("b", "print('x')"),
            result("a", '{"output": "", "exit_code": 1}'),
        ],
    )
    mined = mine([s])
    assert [e.tool_name for e in mined.examples] == ["read_file"]
    example = mined.examples[0]
    assert example.result == "print('x')"
    assert example.context == "list and read"
    assert example.position == 1 and example.session_id == "s1" and example.source == "cli"
    stats = mined.stats
    assert (stats.tool_calls, stats.results_paired, stats.results_failed, stats.calls_unanswered) == (
        2,
        2,
        1,
        0,
    )
    assert mined.filtered["outcome_failed"] == 1


def test_context_is_latest_user_message_before_the_call() -> None:
    s = session(
        "s1",
        [
            Message(role="user", content="first ask"),
            Message(role="assistant", tool_calls=(call("a", "web_search", {"q": "one"}),)),
            result("a", "hits"),
            Message(role="user", content="second ask"),
            Message(role="assistant", tool_calls=(call("b", "web_search", {"q": "two"}),)),
            Message(role="user", content="said after the call"),
            result("b", "more hits"),
        ],
    )
    by_query = {e.arguments["q"]: e.context for e in mine([s]).examples}
    assert by_query == {"one": "first ask", "two": "second ask"}


def test_unanswered_orphan_and_duplicate_results_are_counted() -> None:
    s = session(
        "s1",
        [
            Message(role="user", content="go"),
            Message(
                role="assistant",
                tool_calls=(call("a", "terminal", {"c": 1}), call("b", "terminal", {"c": 2})),
            ),
            result("a", "done"),
            result("a", "done again"),
            result("zzz", "from nowhere"),
        ],
    )
    mined = mine([s])
    assert mined.stats.calls_unanswered == 1
    assert mined.stats.skipped["duplicate_result"] == 1
    assert mined.stats.skipped["result_without_call"] == 1
    assert [e.result for e in mined.examples] == ["done"]


def test_call_id_reused_after_its_answer_opens_a_new_call() -> None:
    # Some providers number calls per turn, so every turn's first call is "call_0".
    s = session(
        "s1",
        [
            Message(role="user", content="first"),
            Message(role="assistant", tool_calls=(call("call_0", "terminal", {"c": "ls"}),)),
            result("call_0", "a.txt"),
            Message(role="user", content="second"),
            Message(role="assistant", tool_calls=(call("call_0", "read_file", {"path": "a.txt"}),)),
            result("call_0", "hello"),
            # Still open: a second call with the same id in one turn is a duplicate.
            Message(
                role="assistant",
                tool_calls=(
                    call("call_1", "terminal", {"c": "pwd"}),
                    call("call_1", "terminal", {"c": "id"}),
                ),
            ),
            result("call_1", "/root"),
        ],
    )
    mined = mine([s])
    assert sorted((e.tool_name, json.dumps(e.arguments), e.result, e.context) for e in mined.examples) == [
        ("read_file", '{"path": "a.txt"}', "hello", "second"),
        ("terminal", '{"c": "ls"}', "a.txt", "first"),
        ("terminal", '{"c": "pwd"}', "/root", "second"),
    ]
    assert (mined.stats.tool_calls, mined.stats.results_paired) == (3, 3)
    assert mined.stats.skipped == {"duplicate_call_id": 1}
    assert mined.stats.calls_unanswered == 0


def test_result_without_id_answers_the_oldest_open_call_of_its_tool() -> None:
    s = session(
        "s1",
        [
            Message(role="user", content="go"),
            Message(
                role="assistant",
                tool_calls=(call("a", "terminal", {"c": 1}), call("b", "read_file", {"p": 1})),
            ),
            result(None, "file body", name="read_file"),
            result(None, "term out", name="terminal"),
        ],
    )
    examples = {e.tool_name: e.result for e in mine([s]).examples}
    assert examples == {"read_file": "file body", "terminal": "term out"}


def test_calls_by_the_simulated_user_are_never_the_agents() -> None:
    s = session(
        "tau",
        [
            Message(
                role="user",
                content="please toggle",
                tool_calls=(call("u1", "toggle_airplane_mode", requestor="user"),),
            ),
            result("u1", "Airplane mode is now ON"),
            Message(
                role="assistant",
                tool_calls=(call("u2", "set_data", requestor="user"), call("a1", "get_status")),
            ),
            result("u2", "done"),
            result("a1", "status: fine"),
        ],
    )
    mined = mine([s])
    assert mined.stats.tool_calls == 1
    assert mined.stats.results_paired == 1
    assert mined.stats.skipped["user_tool_call"] == 2
    assert "result_without_call" not in mined.stats.skipped
    assert [e.tool_name for e in mined.examples] == ["get_status"]


def test_error_flag_from_source_is_used() -> None:
    s = session(
        "tau",
        [
            Message(role="user", content="cancel"),
            Message(role="assistant", tool_calls=(call("a", "cancel_order", {"id": 1}),)),
            result("a", "cancelled", error=True),
        ],
    )
    mined = mine([s])
    assert mined.examples == [] and mined.stats.results_failed == 1


def test_empty_result_is_unknown_and_not_kept() -> None:
    s = session(
        "s",
        [
            Message(role="user", content="x"),
            Message(role="assistant", tool_calls=(call("a", "terminal", {"c": "true"}),)),
            result("a", ""),
        ],
    )
    mined = mine([s])
    assert mined.examples == []
    assert mined.stats.results_unknown == 1 and mined.stats.results_failed == 0
    assert mined.filtered["outcome_unknown"] == 1


def _repeat(sid: str, args_json: str, started: float, out: str = "ok", tool: str = "terminal") -> Session:
    return session(
        sid,
        [
            Message(role="user", content=f"ask {sid}"),
            Message(role="assistant", tool_calls=(call("c", tool, json.loads(args_json)),)),
            result("c", out),
        ],
        started_at=started,
    )


def test_deduplicates_on_canonical_arguments_and_keeps_newest() -> None:
    sessions = [
        _repeat("s1", '{"command": "ls", "cwd": "/tmp"}', 10.0, "old output"),
        _repeat("s2", '{ "cwd" : "/tmp",   "command" : "ls" }', 30.0, "new output"),
        _repeat("s3", '{"cwd": "/tmp", "command": "ls"}', 20.0, "middle output"),
        _repeat("s4", '{"command": "ls -la"}', 40.0),
    ]
    examples = mine(sessions).examples
    assert [(e.arguments, e.count) for e in examples] == [
        ({"command": "ls", "cwd": "/tmp"}, 3),
        ({"command": "ls -la"}, 1),
    ]
    top = examples[0]
    assert top.last_seen == 30.0
    assert (top.result, top.session_id, top.context) == ("new output", "s2", "ask s2")


def test_same_arguments_different_tool_are_different_examples() -> None:
    examples = mine(
        [
            _repeat("s1", '{"path": "a"}', 1.0, tool="read_file"),
            _repeat("s2", '{"path": "a"}', 2.0, tool="search_files"),
        ]
    ).examples
    assert sorted(e.tool_name for e in examples) == ["read_file", "search_files"]


def test_raw_arguments_dedupe_on_collapsed_whitespace() -> None:
    a = ToolCall(id="c", name="terminal", raw_arguments="ls   -la\n")
    b = ToolCall(id="c", name="terminal", raw_arguments=" ls -la")
    assert canonical_arguments(a) == canonical_arguments(b) != canonical_arguments(call("c", "terminal", {}))
    sessions = [
        session(
            "s1",
            [
                Message(role="user", content="x"),
                Message(role="assistant", tool_calls=(a,)),
                result("c", "out"),
            ],
        ),
        session(
            "s2",
            [
                Message(role="user", content="x"),
                Message(role="assistant", tool_calls=(b,)),
                result("c", "out"),
            ],
        ),
    ]
    (example,) = mine(sessions).examples
    assert example.count == 2 and example.arguments == {} and example.raw_arguments == " ls -la"


def test_rank_by_count_then_recency_and_cap() -> None:
    sessions = [
        _repeat("a1", '{"q": "a"}', 1.0),
        _repeat("a2", '{"q": "a"}', 2.0),
        _repeat("b1", '{"q": "b"}', 50.0),
        _repeat("c1", '{"q": "c"}', 60.0),
        _repeat("d1", '{"q": "d"}', 5.0),
    ]
    mined = mine(sessions, max_examples=3)
    assert [e.arguments["q"] for e in mined.examples] == ["a", "c", "b"]
    assert mined.distinct == 4
    assert mined.filtered["beyond_max_examples"] == 1


def test_result_and_context_truncated_with_visible_marker() -> None:
    long_out = "x" * 5000
    s = session(
        "s",
        [
            Message(role="user", content="u" * 300),
            Message(role="assistant", tool_calls=(call("a", "read_file", {"path": "big"}),)),
            result("a", long_out),
        ],
    )
    (example,) = mine([s], result_chars=100, context_chars=50).examples
    assert example.result.startswith("x" * 100)
    assert example.result.endswith("…[truncated 4900 of 5000 chars]")
    assert example.context == truncate("u" * 300, 50)
    assert "[result from successful session]" not in example.result


def _one_call_session(sid: str, **kw: object) -> Session:
    total = int(kw.pop("total", 20))  # type: ignore[call-overload]
    return session(
        sid,
        [
            Message(role="user", content="x"),
            Message(role="assistant", tool_calls=(call("a", "terminal", {"s": sid}),)),
            result("a", "fine"),
        ],
        total=total,
        **kw,
    )


def test_min_messages_filter_default_20() -> None:
    mined = mine([_one_call_session("short", total=19), _one_call_session("edge", total=20)])
    assert [e.session_id for e in mined.examples] == ["edge"]
    assert mined.filtered["too_short"] == 1
    assert mined.stats.sessions == 2  # stats still cover every session read
    assert len(mine([_one_call_session("short", total=5)], min_messages=0).examples) == 1


def test_source_filter_globs() -> None:
    sessions = [
        _one_call_session("a", source="cli"),
        _one_call_session("b", source="telegram"),
        _one_call_session("c", source="discord"),
    ]
    assert [e.session_id for e in mine(sessions, source_filter="cli").examples] == ["a"]
    assert sorted(e.session_id for e in mine(sessions, source_filter=["tele*", "discord"]).examples) == [
        "b",
        "c",
    ]
    assert mine(sessions, source_filter="cli").filtered["source_filtered"] == 2


def test_errored_sessions_and_zero_reward_are_skipped() -> None:
    sessions = [
        _one_call_session("err", end_reason="error"),
        _one_call_session("fine", end_reason="user_exit"),
        _one_call_session("lost", reward=0.0),
        _one_call_session("won", reward=1.0),
    ]
    mined = mine(sessions)
    assert sorted(e.session_id for e in mined.examples) == ["fine", "won"]
    assert mined.filtered["errored_session"] == 1 and mined.filtered["zero_reward"] == 1
    assert len(mine(sessions, skip_zero_reward=False, skip_end_reasons=()).examples) == 4
    assert len(mine(sessions, skip_end_reasons=["user_exit"]).examples) == 2


def test_trivial_tools_skipped_by_default_and_configurable() -> None:
    def with_tool(name: str) -> Session:
        return session(
            name,
            [
                Message(role="user", content="x"),
                Message(role="assistant", tool_calls=(call("a", name, {"k": 1}),)),
                result("a", "saved"),
            ],
        )

    sessions = [with_tool(n) for n in ("clarify", "memory", "fact_store", "fact_feedback", "terminal")]
    mined = mine(sessions)
    assert [e.tool_name for e in mined.examples] == ["terminal"]
    assert mined.filtered["trivial_tool"] == 4
    assert {e.tool_name for e in mine(sessions, skip_tools=["terminal"]).examples} == {
        "clarify",
        "memory",
        "fact_store",
        "fact_feedback",
    }
    path = mining_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"trivial_tools": ["terminal"], "keep_tools": ["memory"]}))
    assert [e.tool_name for e in mine(sessions).examples] == ["memory"]


def test_max_sessions_stops_reading() -> None:
    consumed: list[str] = []

    def stream() -> Iterator[Session]:
        for i in range(10):
            consumed.append(f"s{i}")
            yield _one_call_session(f"s{i}", total=25 if i % 2 else 5)

    mined = mine(stream(), max_sessions=2)
    assert mined.sessions_mined == 2
    assert consumed == ["s0", "s1", "s2", "s3"]
    assert sorted(e.session_id for e in mined.examples) == ["s1", "s3"]
    consumed.clear()
    assert mine(stream(), max_sessions=0).examples == []
    assert consumed == []
    # Stats only (max_examples=0, as kindling stats mines) honours the same stop.
    stats_only = mine(stream(), max_sessions=2, max_examples=0)
    assert (stats_only.stats.sessions, stats_only.sessions_mined, stats_only.examples) == (4, 2, [])
    assert consumed == ["s0", "s1", "s2", "s3"]
    consumed.clear()
    assert mine(stream(), max_sessions=0, max_examples=0).stats.sessions == 0
    assert consumed == []


def test_stats_only_mode_and_reader_report() -> None:
    report = ReadReport()
    report.skip("malformed_tool_calls", 3)
    mined = mine([_one_call_session("a")], max_examples=0, report=report)
    assert mined.examples == [] and not mined.filtered
    assert mined.stats.skipped["malformed_tool_calls"] == 3
    assert mined.stats.results_paired == 1


def test_examples_round_trip_as_json() -> None:
    mined = mine([_one_call_session("a", started_at=5.0)])
    data = mined.as_dict()
    assert data["examples"][0]["outcome"] == OutcomeStatus.OK.value
    assert data["examples"][0]["arguments"] == {"s": "a"}
    assert data["sessions_mined"] == 1
    json.dumps(data)


def test_negative_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="max_examples"):
        mine([], max_examples=-1)
    with pytest.raises(ValueError, match="result_chars"):
        mine([], result_chars=0)


turn_strategy = st.lists(
    st.tuples(
        st.sampled_from(["terminal", "read_file", "web_search", "patch"]),
        st.integers(min_value=0, max_value=5),
        st.sampled_from(["ok", "fail", "missing"]),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(turns=st.lists(turn_strategy, min_size=1, max_size=8), data=st.data())
def test_pairing_survives_any_answer_order(
    turns: list[list[tuple[str, int, str]]], data: st.DataObject
) -> None:
    messages: list[Message] = [Message(role="user", content="go")]
    expected_failed = expected_paired = expected_unanswered = 0
    for t, turn in enumerate(turns):
        calls = tuple(call(f"t{t}c{i}", name, {"n": n}) for i, (name, n, _) in enumerate(turn))
        messages.append(Message(role="assistant", tool_calls=calls))
        answers = []
        for c, (name, n, fate) in zip(calls, turn, strict=True):
            if fate == "missing":
                expected_unanswered += 1
                continue
            expected_paired += 1
            expected_failed += fate == "fail"
            text = f"done {name} {n}" if fate == "ok" else f"Error: {name} {n} broke"
            answers.append(result(c.id, text))
        messages.extend(data.draw(st.permutations(answers)))
    mined = mine([session("h", messages)], min_messages=0)
    stats = mined.stats
    assert stats.tool_calls == sum(len(turn) for turn in turns)
    assert (stats.results_paired, stats.results_failed, stats.calls_unanswered) == (
        expected_paired,
        expected_failed,
        expected_unanswered,
    )
    assert not stats.skipped
    for example in mined.examples:
        # Each kept result is the one its own call produced, whatever order the answers came in.
        assert example.result == f"done {example.tool_name} {example.arguments['n']}"
    assert sum(e.count for e in mined.examples) == expected_paired - expected_failed


def test_one_shared_arguments_object_keys_by_tool_and_by_content() -> None:
    # Readers share one parsed arguments object between calls with the same text; mine's key
    # cache must still tell tools apart, and count every call of each.
    shared = {"path": "a.py"}
    messages: list[Message] = [Message(role="user", content="read it")]
    for index, tool in enumerate(["read_file", "search_files", "read_file", "read_file"]):
        messages.append(Message(role="assistant", tool_calls=(call(f"c{index}", tool, shared),)))
        messages.append(result(f"c{index}", f"out {index}"))
    examples = mine([session("s1", messages)]).examples
    assert [(e.tool_name, e.arguments, e.count, e.result) for e in examples] == [
        ("read_file", {"path": "a.py"}, 3, "out 3"),
        ("search_files", {"path": "a.py"}, 1, "out 1"),
    ]


def test_more_distinct_arguments_than_the_key_cache_holds() -> None:
    from kindling.mining.passes import _KEY_CACHE_ENTRIES

    distinct = _KEY_CACHE_ENTRIES + 50
    messages: list[Message] = [Message(role="user", content="run them")]
    for index in range(distinct * 2):
        args = {"command": f"echo {index % distinct}"}
        messages.append(Message(role="assistant", tool_calls=(call(f"c{index}", "terminal", args),)))
        messages.append(result(f"c{index}", "ok"))
    mined = mine([session("s1", messages)], max_examples=distinct * 2)
    assert mined.distinct == distinct
    assert all(e.count == 2 for e in mined.examples)


def test_stats_does_not_import_the_miner() -> None:
    # compute_stats lives beside mine (patterns imports stats, never the other way round).
    from pathlib import Path

    import kindling.mining.stats as stats_module
    from kindling.mining import compute_stats
    from kindling.mining.patterns import compute_stats as beside_mine

    assert compute_stats is beside_mine
    assert "kindling.mining.patterns" not in Path(stats_module.__file__).read_text()
