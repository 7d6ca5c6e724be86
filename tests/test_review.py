"""The background review end to end, against the real loopback fake OpenAI server."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from fake_openai import FakeOpenAI, text, tool_call, tool_calls
from kindling.agent import Runtime, Tool, ToolRegistry, run
from kindling.review import (
    MemoryStore,
    Provenance,
    ReviewExecutor,
    ReviewTriggers,
    SkillStore,
    review_session,
    session_messages,
    spawn_review,
    summarize_actions,
)
from kindling.review.prompts import HERMES_PROMPT_PREFIX, review_prompt
from kindling.sessions import generate_sample_db, iter_sessions

SYSTEM_PROMPT = "You are Hermes.  \n\tTools: terminal, memory.\n§ ünïcödé — keep it byte for byte ✓\n"
SKILL = (
    "---\nname: release-notes\ndescription: Write release notes from merged PRs.\n---\n1. List merged PRs.\n"
)
PRIOR_MEMORY_RESULT = json.dumps(
    {"success": True, "message": "Entry added.", "target": "memory", "usage": "1% — 9/2,200 chars"}
)


def _runtime(server: FakeOpenAI, **overrides: Any) -> Runtime:
    settings: dict[str, Any] = {"timeout": 5.0, "max_retries": 1, "backoff": 0.01, "max_backoff": 0.02}
    settings.update(overrides)
    return Runtime(model="parent-model", base_url=server.base_url, api_key="sk-parent", **settings)


def _snapshot() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "I'm Ada. Always use uv, never pip."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "prior_1", "type": "function", "function": {"name": "memory", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "prior_1", "content": PRIOR_MEMORY_RESULT},
        {"role": "assistant", "content": "Noted, Ada."},
    ]


def _parent_tools(ran: list[dict[str, Any]]) -> ToolRegistry:
    def terminal(args: dict[str, Any]) -> str:
        ran.append(args)
        Path("/tmp/never").touch()  # never reached: the review must deny it
        return "{}"

    schema = {"name": "terminal", "description": "Run a shell command.", "parameters": {"type": "object"}}
    return ToolRegistry.of([Tool("terminal", "terminal", schema, terminal)])


def test_review_inherits_prompt_and_history_denies_terminal_and_writes_files(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [
        tool_calls(
            ("terminal", {"command": "rm -rf ~"}, "r_term"),
            ("memory", {"action": "add", "target": "user", "content": "Ada prefers uv over pip."}, "r_mem"),
        ),
        tool_call("skill_manage", {"action": "create", "name": "release-notes", "content": SKILL}, "r_skill"),
        tool_call(
            "memory", {"action": "add", "target": "user", "content": "Ada prefers uv over pip."}, "r_dup"
        ),
        text("Saved the preference and a skill."),
    ]
    ran: list[dict[str, Any]] = []
    heard: list[str] = []
    snapshot = _snapshot()
    provenance = Provenance(write_origin="background_review", session_id="sess-1", platform="cli", task_id="")
    handle = spawn_review(
        snapshot,
        _runtime(fake_openai),
        callback=heard.append,
        parent_tools=_parent_tools(ran),
        provenance=provenance,
        executor=ReviewExecutor(),
    )
    outcome = handle.join(timeout=20)
    assert outcome is not None and outcome.error is None, outcome

    requests = fake_openai.chat_requests()
    assert len(requests) == 4
    for body in requests:
        assert body["model"] == "parent-model"
        assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert body["messages"][: len(snapshot)] == snapshot
        prompt = body["messages"][len(snapshot)]
        assert prompt["role"] == "user" and prompt["content"] == review_prompt(memory=True, skills=True)
        assert not prompt["content"].startswith(HERMES_PROMPT_PREFIX)
        assert body["tools"][0]["function"]["name"] == "terminal"  # the parent's tool list is kept
    raw = next(r for r in fake_openai.requests if r["path"].endswith("/chat/completions"))
    assert {k.lower(): v for k, v in raw["headers"].items()}["authorization"] == "Bearer sk-parent"

    assert ran == [] and not Path("/tmp/never").exists()
    assert outcome.denied == ["terminal"]
    denial = json.loads(next(m for m in outcome.messages if m.get("tool_call_id") == "r_term")["content"])
    assert denial["success"] is False and "denied and not executed" in denial["error"]

    assert MemoryStore().path("user").read_text(encoding="utf-8") == "Ada prefers uv over pip."
    assert not MemoryStore().path("memory").exists()
    assert SkillStore().read("release-notes").content == SKILL

    # The inherited "Entry added." result (prior_1) is not reported as the review's own work.
    assert outcome.actions == ["User profile updated", "Skill 'release-notes' created"]
    assert heard == ["Self-improvement review: User profile updated · Skill 'release-notes' created"]
    assert outcome.summary == heard[0]

    records, malformed = MemoryStore().read_provenance()
    assert malformed == 0 and len(records) == 1
    assert {k: v for k, v in records[0].items() if k not in {"ts"}} == {
        "action": "add",
        "target": "user",
        "content": "Ada prefers uv over pip.",
        "write_origin": "background_review",
        "session_id": "sess-1",
        "platform": "cli",
        "tool_name": "memory",
        "tool_call_id": "r_mem",
    }


def test_system_prompt_argument_is_put_first_when_snapshot_has_none(fake_openai: FakeOpenAI) -> None:
    snapshot = _snapshot()[1:]
    handle = spawn_review(
        snapshot,
        _runtime(fake_openai),
        system_prompt=SYSTEM_PROMPT,
        review_skills=False,
        executor=ReviewExecutor(),
    )
    outcome = handle.join(timeout=20)
    assert outcome is not None and outcome.ok and outcome.actions == []
    body = fake_openai.chat_requests()[0]
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert body["messages"][1:-1] == snapshot
    assert body["messages"][-1]["content"] == review_prompt(memory=True, skills=False)
    assert [t["function"]["name"] for t in body["tools"]] == ["memory"]


def _turn_with_review(server: FakeOpenAI, heard: list[str], **runtime: Any) -> tuple[Any, Any, list[Any]]:
    """A caller's turn on its own endpoint: answer the user, then spawn a review of the turn.

    Returns the caller's RunResult, the review handle and the conversation the caller keeps.
    """
    caller = FakeOpenAI()
    caller.start()
    try:
        caller.script = [text("Here is your answer.")]
        conversation = _snapshot()
        result = run(conversation, runtime=_runtime(caller))
        conversation = result.messages
        kept = json.loads(json.dumps(conversation))
        handle = spawn_review(
            conversation, _runtime(server, **runtime), callback=heard.append, executor=ReviewExecutor()
        )
        # The caller carries on with its next request while the review is still failing.
        caller.script = [text("Next answer.")]
        follow_up = run([*conversation, {"role": "user", "content": "next"}], runtime=_runtime(caller))
        assert follow_up.ok and follow_up.final_text == "Next answer."
        for body in caller.chat_requests():  # the review never touches the caller's endpoint
            assert all(m.get("content") != review_prompt(memory=True, skills=True) for m in body["messages"])
    finally:
        caller.stop()
    assert conversation == kept  # the caller's own history is not polluted by the review
    return result, handle, conversation


@pytest.mark.parametrize(
    ("script", "runtime", "expected"),
    [
        ([], {}, "HTTP 500"),
        ([{"fault": "delay", "seconds": 1.0}, text("late")], {"timeout": 0.2}, "timed out"),
        ([{"fault": "malformed"}], {}, "not valid JSON"),
    ],
    ids=["server-500", "timeout", "malformed-json"],
)
def test_endpoint_failures_are_reported_and_turn_completes(
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    script: list[dict[str, Any]],
    runtime: dict[str, Any],
    expected: str,
) -> None:
    fake_openai.script = list(script)
    if not script:
        fake_openai.default = {"fault": "status", "status": 500}
    heard: list[str] = []
    with caplog.at_level(logging.ERROR, logger="kindling.review.loop"):
        result, handle, conversation = _turn_with_review(fake_openai, heard, **runtime)
        assert result.ok and result.final_text == "Here is your answer."
        outcome = handle.join(timeout=20)
        assert conversation[-1] == {"role": "assistant", "content": "Here is your answer."}
    assert outcome is not None and outcome.error is not None and expected in outcome.error
    assert heard == [f"Self-improvement review failed: {outcome.error}"]
    assert any("failed" in r.getMessage() and expected in r.getMessage() for r in caplog.records)
    assert not MemoryStore().path("memory").exists() and not MemoryStore().path("user").exists()


def test_tool_that_raises_ends_the_review_as_a_failure(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the memory directory should be", encoding="utf-8")
    fake_openai.script = [
        tool_calls(
            ("memory", {"action": "add", "target": "memory", "content": "x"}, "c1"),
            ("memory", {"action": "add", "target": "memory", "content": "y"}, "c2"),
        ),
        text("never asked"),
    ]
    heard: list[str] = []
    handle = spawn_review(
        _snapshot(),
        _runtime(fake_openai),
        callback=heard.append,
        memory_store=MemoryStore(blocker / "memories"),
        executor=ReviewExecutor(),
    )
    outcome = handle.join(timeout=20)
    assert outcome is not None and outcome.error is not None
    assert outcome.error.startswith("Tool 'memory' failed: StoreError")
    assert heard == [f"Self-improvement review failed: {outcome.error}"]
    assert len(fake_openai.chat_requests()) == 1
    answered = [m["tool_call_id"] for m in outcome.messages if m["role"] == "tool"]
    assert answered[-2:] == ["c1", "c2"]  # every call answered, the protocol stays valid


def test_callback_that_raises_is_logged_not_raised(
    fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.script = [
        tool_call("memory", {"action": "add", "target": "memory", "content": "fact"}),
        text("ok"),
    ]

    def bad_callback(line: str) -> None:
        raise RuntimeError("chat is down")

    with caplog.at_level(logging.ERROR, logger="kindling.review.loop"):
        handle = spawn_review(
            _snapshot(), _runtime(fake_openai), callback=bad_callback, executor=ReviewExecutor()
        )
        outcome = handle.join(timeout=20)
    assert outcome is not None and outcome.actions == ["Memory updated"]
    assert any("callback" in r.getMessage() for r in caplog.records)


def test_a_new_review_under_the_same_key_cancels_the_running_one(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [{"fault": "status", "status": 503}]
    executor = ReviewExecutor()
    slow = _runtime(fake_openai, max_retries=3, backoff=5.0, max_backoff=5.0)
    first = spawn_review(_snapshot(), slow, key="chat-1", executor=executor)
    deadline = time.monotonic() + 10
    while not fake_openai.chat_requests() and time.monotonic() < deadline:
        time.sleep(0.01)
    second = spawn_review(_snapshot(), _runtime(fake_openai), key="chat-1", executor=executor)
    first_outcome = first.join(timeout=10)
    assert first.cancelled and first_outcome is not None and first_outcome.cancelled
    assert first_outcome.error == "Run cancelled."
    second_outcome = second.join(timeout=10)
    assert second_outcome is not None and second_outcome.ok
    assert executor.join_all(timeout=5)


def test_two_reviews_writing_the_same_memory_file_lose_no_entry(fake_openai: FakeOpenAI) -> None:
    other = FakeOpenAI()
    other.start()
    try:
        for name, server in (("a", fake_openai), ("b", other)):
            server.script = [
                tool_calls(
                    *[
                        (
                            "memory",
                            {"action": "add", "target": "memory", "content": f"review {name} fact {i}"},
                        )
                        for i in range(8)
                    ]
                ),
                text("done"),
            ]
        executor = ReviewExecutor()
        handles = [
            spawn_review(_snapshot(), _runtime(server), key=key, review_skills=False, executor=executor)
            for key, server in (("a", fake_openai), ("b", other))
        ]
        outcomes = [h.join(timeout=20) for h in handles]
    finally:
        other.stop()
    assert all(o is not None and o.ok and o.actions == ["Memory updated"] for o in outcomes)
    entries = MemoryStore().entries("memory")
    assert sorted(entries) == sorted(f"review {n} fact {i}" for n in "ab" for i in range(8))


CALLS = [("n1", "memory"), ("n2", "skill_manage"), ("n3", "memory"), ("n4", "memory")]
CALLS += [("n5", "skill_manage"), ("n6", "skill_view"), ("n7", "memory")]


def test_summary_skips_inherited_results_dedupes_and_keeps_order() -> None:
    old_skill = json.dumps({"success": True, "message": "Skill 'old-skill' created."})
    prior = [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "old", "type": "function", "function": {"name": "memory", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "old", "content": PRIOR_MEMORY_RESULT},
        {"role": "tool", "name": "skill_manage", "content": old_skill},
    ]
    added_user = json.dumps({"success": True, "message": "Entry added.", "target": "user"})
    review = [
        *prior,
        {
            "role": "assistant",
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}} for i, n in CALLS
            ],
        },
        {"role": "tool", "tool_call_id": "n1", "content": added_user},
        {
            "role": "tool",
            "tool_call_id": "n2",
            "content": json.dumps({"success": True, "message": "Skill 'x' patched."}),
        },
        {"role": "tool", "tool_call_id": "n3", "content": added_user},
        {"role": "tool", "tool_call_id": "n4", "content": json.dumps({"success": False, "error": "nope"})},
        {"role": "tool", "tool_call_id": "n5", "content": "not json"},
        {"role": "tool", "tool_call_id": "n6", "content": json.dumps({"success": True, "name": "x"})},
        {
            "role": "tool",
            "tool_call_id": "n7",
            "content": json.dumps(
                {"success": True, "message": "Entry already exists (no duplicate added).", "target": "memory"}
            ),
        },
        # Same content as an id-less inherited result: skipped by content.
        {"role": "tool", "name": "skill_manage", "content": old_skill},
        {"role": "tool", "tool_call_id": "old", "content": added_user},  # inherited id: skipped
    ]
    assert summarize_actions(review, prior) == ["User profile updated", "Skill 'x' patched"]
    assert summarize_actions(review, []) == [
        "Memory updated",
        "Skill 'old-skill' created",
        "User profile updated",
        "Skill 'x' patched",
    ]


def test_triggers_count_turns_and_tool_iterations_and_reset() -> None:
    triggers = ReviewTriggers(memory_interval=2, skill_interval=3)
    call = {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "terminal"}}]}
    triggers.observe([{"role": "user", "content": "a"}, call, call])
    assert not triggers.due()
    triggers.observe([{"role": "user", "content": "b"}, call])
    plan = triggers.take()
    assert plan.memory and plan.skills and triggers.user_turns == 0 and triggers.tool_iterations == 0
    triggers.observe([{"role": "user", "content": "c"}, {"role": "user", "content": "d"}, call, call, call])
    triggers.observe([{"role": "assistant", "tool_calls": [{"id": "2", "function": {"name": "memory"}}]}])
    assert triggers.due().memory is False and triggers.due().skills is True  # the agent kept memory itself
    triggers.observe(
        [{"role": "assistant", "tool_calls": [{"id": "3", "function": {"name": "skill_manage"}}]}]
    )
    assert not triggers.due()
    assert not ReviewTriggers(memory_interval=0, skill_interval=0, user_turns=99, tool_iterations=99).due()


def test_review_prompts_are_our_own() -> None:
    for memory, skills in ((True, False), (False, True), (True, True)):
        prompt = review_prompt(memory=memory, skills=skills)
        assert not prompt.startswith(HERMES_PROMPT_PREFIX) and "Nothing to save." in prompt
    with pytest.raises(ValueError):
        review_prompt(memory=False, skills=False)


def test_review_session_reads_a_stored_session(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    db = generate_sample_db(tmp_path / "state.db", sessions=4)
    sessions = list(iter_sessions(db))  # read to the end: the reader closes its connections
    session = sessions[0]
    fake_openai.script = [
        tool_call("memory", {"action": "add", "target": "memory", "content": "Sample fact."}, "rs_1"),
        text("Saved."),
    ]
    outcome = review_session(db, session.id, runtime=_runtime(fake_openai), review_skills=False)
    assert outcome.ok and outcome.actions == ["Memory updated"]
    assert outcome.summary == "Self-improvement review: Memory updated"
    sent = fake_openai.chat_requests()[0]["messages"]
    assert sent[:-1] == session_messages(session)
    assert sent[0]["content"] == session.messages[0].content
    records, _ = MemoryStore().read_provenance()
    assert records[0]["session_id"] == session.id and records[0]["tool_call_id"] == "rs_1"
    assert records[0]["write_origin"] == "session_review"


def test_review_session_unknown_id_is_not_found(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    from kindling.errors import NotFoundError

    db = generate_sample_db(tmp_path / "state.db", sessions=2)
    with pytest.raises(NotFoundError, match="No session 'nope'"):
        review_session(db, "nope", runtime=_runtime(fake_openai))
    assert fake_openai.chat_requests() == []


def test_session_messages_repairs_the_tool_protocol() -> None:
    from kindling.review.session import ConversionReport
    from kindling.sessions import Message, Session, ToolCall

    session = Session(
        id="s",
        source="test",
        messages=(
            Message("user", "hi"),
            Message("tool", "orphan", tool_call_id="ghost"),
            Message(
                "assistant",
                None,
                tool_calls=(ToolCall("c1", "read_file", {"path": "a"}), ToolCall("c2", "x", {}, "{bad")),
            ),
            Message("tool", "contents", tool_call_id="c1"),
            Message("assistant", "done"),
        ),
    )
    report = ConversionReport()
    messages = session_messages(session, report)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert messages[1]["tool_calls"][1]["function"]["arguments"] == "{bad"
    assert messages[3]["tool_call_id"] == "c2" and "No result was recorded" in messages[3]["content"]
    assert (report.orphan_results, report.unanswered_calls) == (1, 1)


def test_spawn_returns_before_the_review_finishes(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [{"fault": "delay", "seconds": 0.5}, text("Nothing to save.")]
    handle = spawn_review(_snapshot(), _runtime(fake_openai), executor=ReviewExecutor())
    assert not handle.done()  # the request is still in flight on the review's thread
    outcome = handle.join(timeout=10)
    assert (
        outcome is not None and outcome.ok and outcome.summary == "Self-improvement review: nothing to save"
    )


def test_pool_queues_beyond_max_workers_and_cancels_queued_reviews(fake_openai: FakeOpenAI) -> None:
    with pytest.raises(ValueError):
        ReviewExecutor(max_workers=0)
    fake_openai.script = [{"fault": "delay", "seconds": 0.4}, text("Nothing to save.")]
    executor = ReviewExecutor(max_workers=1)
    heard: list[str] = []
    first = spawn_review(
        _snapshot(), _runtime(fake_openai), key="a", callback=heard.append, executor=executor
    )
    queued = spawn_review(
        _snapshot(), _runtime(fake_openai), key="b", callback=heard.append, executor=executor
    )
    assert len(executor.running()) == 2
    queued.cancel()
    assert queued.join(timeout=10) is not None and first.join(timeout=10) is not None
    assert first.outcome is not None and first.outcome.ok
    assert (
        queued.outcome is not None and queued.outcome.cancelled and queued.outcome.error == "Run cancelled."
    )
    assert len(fake_openai.chat_requests()) == 1  # the cancelled review never reached the endpoint
    assert heard == []  # nothing changed and the cancellation was the caller's own doing
    assert executor.join_all(timeout=5) and executor.running() == []


def test_a_failing_review_prints_nothing_into_an_app_that_never_configured_logging() -> None:
    script = """
import sys
from fake_openai import FakeOpenAI, tool_call
from kindling.agent import Runtime
from kindling.review import MemoryStore, ReviewExecutor, spawn_review

server = FakeOpenAI()
server.start()
server.script = [{"fault": "status", "status": 503}, tool_call("terminal", {"command": "ls"}), tool_call(
    "memory", {"action": "replace", "target": "memory", "old_text": "nothing", "content": "x"})]
server.default = {"fault": "malformed"}
runtime = Runtime(model="m", base_url=server.base_url, max_retries=1, backoff=0.01)
heard = []
handle = spawn_review([{"role": "user", "content": "hi"}], runtime, callback=heard.append,
                      memory_store=MemoryStore(sys.argv[1]), executor=ReviewExecutor())
outcome = handle.join(20)
server.stop()
print(heard[0])
"""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root / 'tests'}"}
    with tempfile.TemporaryDirectory() as directory:
        done = subprocess.run(
            [sys.executable, "-c", script, directory], env=env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    # Retry warnings, the denial and the failure reach the callback, not the app's own stderr.
    assert done.stdout.startswith("Self-improvement review failed:") and "not valid JSON" in done.stdout
    assert done.stderr == ""


def test_summary_reports_a_new_result_whose_text_matches_an_inherited_one() -> None:
    patched = json.dumps(
        {"success": True, "message": "Skill 'deploy' patched.", "path": "/s/deploy/SKILL.md"}
    )
    prior = [{"role": "tool", "content": patched}]  # an id-less result in the parent's history
    review = [
        *prior,
        {
            "role": "assistant",
            "tool_calls": [{"id": "new", "type": "function", "function": {"name": "skill_manage"}}],
        },
        {"role": "tool", "tool_call_id": "new", "content": patched},  # the review patched it again
    ]
    assert summarize_actions(review, prior) == ["Skill 'deploy' patched"]


def test_spawn_with_a_broken_snapshot_reports_instead_of_raising(fake_openai: FakeOpenAI) -> None:
    heard: list[str] = []
    handle = spawn_review(
        42,  # type: ignore[arg-type]
        _runtime(fake_openai),
        callback=heard.append,
        executor=ReviewExecutor(),
    )
    outcome = handle.join(timeout=10)
    assert outcome is not None and outcome.error is not None
    assert "the snapshot is not a list of messages" in outcome.error
    assert heard == [f"Self-improvement review failed: {outcome.error}"]
    assert fake_openai.chat_requests() == []


def test_default_provenance_marks_a_background_review(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [
        tool_call("memory", {"action": "add", "target": "memory", "content": "Uses uv."}, "d1"),
        text("ok"),
    ]
    outcome = spawn_review(_snapshot(), _runtime(fake_openai), executor=ReviewExecutor()).join(timeout=20)
    assert outcome is not None and outcome.actions == ["Memory updated"]
    records, _ = MemoryStore().read_provenance()
    assert {k: v for k, v in records[0].items() if k not in {"ts", "content"}} == {
        "action": "add",
        "target": "memory",
        "write_origin": "background_review",
        "execution_context": "background_review",
        "tool_name": "memory",
        "tool_call_id": "d1",
    }


def test_a_stored_system_prompt_leads_the_review_and_the_platform_is_recorded(
    fake_openai: FakeOpenAI,
) -> None:
    from kindling.review import review_stored
    from kindling.sessions import Message, Session

    session = Session(
        id="tg-1",
        source="telegram",
        parent_id="tg-0",
        messages=(Message("user", "Call me Ada."), Message("assistant", "Hi Ada.")),
        metadata={"system_prompt": SYSTEM_PROMPT, "task_id": "t-9"},
    )
    fake_openai.script = [
        tool_call("memory", {"action": "add", "target": "user", "content": "Goes by Ada."}, "s1"),
        text("Saved."),
    ]
    outcome = review_stored(session, runtime=_runtime(fake_openai), review_skills=False)
    assert outcome.ok and outcome.actions == ["User profile updated"]
    sent = fake_openai.chat_requests()[0]["messages"]
    assert sent[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert sent[1:3] == session_messages(session)
    records, _ = MemoryStore().read_provenance()
    assert {k: records[0].get(k) for k in ("session_id", "parent_session_id", "platform", "task_id")} == {
        "session_id": "tg-1",
        "parent_session_id": "tg-0",
        "platform": "telegram",
        "task_id": "t-9",
    }


def test_a_snapshot_taken_mid_turn_is_made_valid_before_it_is_sent(fake_openai: FakeOpenAI) -> None:
    mid_turn = [
        *_snapshot(),
        {"role": "tool", "tool_call_id": "ghost", "content": "a result nobody asked for"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "open_1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
            ],
        },
    ]
    outcome = spawn_review(mid_turn, _runtime(fake_openai), executor=ReviewExecutor()).join(timeout=20)
    assert outcome is not None and outcome.ok
    sent = fake_openai.chat_requests()[0]["messages"]
    assert sent[: len(_snapshot())] == _snapshot()  # the valid part is untouched
    assert all(m.get("tool_call_id") != "ghost" for m in sent)  # the orphan result is dropped
    answer = sent[len(_snapshot()) + 1]
    assert answer["tool_call_id"] == "open_1" and "No result was recorded" in answer["content"]
    assert sent[-1]["content"] == review_prompt(memory=True, skills=True)
