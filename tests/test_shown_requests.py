"""Each example in a warm-up is shown under the user message that led to its call.

Checked independently of the warm-up's own bookkeeping: every call a warm-up shows is traced back,
by its provenance, to the session and position it came from; the user message just before that
position in the session as read is the request it must be shown under (with personal data replaced
by placeholders, which the check lets stand for any text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kindling.sessions import iter_sessions
from kindling.sessions.model import Session
from kindling.sessions.sample import generate_sample_db
from kindling.templates.build import template_from_sessions
from kindling.warmup.warm import warm_conversation

DEV_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
TAU2_FILE = DEV_DATA / "tau2-bench-sierra" / "gpt-4.1_retail_defautl_gpt-4.1_1trials.json"
PLACEHOLDER = re.compile(r"<[a-z_]+(?:_\d+)?>")
LABEL = re.compile(r"^Past request \d+: ", re.M)


def shown_calls(messages: list[dict[str, Any]]) -> Iterator[tuple[str, str, bytes]]:
    """Yield (the request text a call is shown under, its tool, its arguments as sorted JSON)."""
    request = ""
    for message in messages:
        content = str(message.get("content") or "")
        if message["role"] == "user" and LABEL.search(content):
            request = LABEL.split(content)[-1].strip()
        for call in message.get("tool_calls") or ():
            function = call["function"]
            arguments = orjson.loads(function["arguments"])
            yield request, function["name"], orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)


def preceding_user_message(session: Session, position: int) -> str:
    before = [
        m.content for m in session.messages[:position] if m.role == "user" and (m.content or "").strip()
    ]
    return before[-1] if before else ""


def first_request(session: Session) -> str:
    return next(m.content for m in session.messages if m.role == "user" and (m.content or "").strip())


def matches(shown: str, original: str) -> bool:
    """``shown`` is ``original`` with some spans replaced by placeholders (and whitespace folded)."""
    pattern = ".+?".join(re.escape(" ".join(part.split())) for part in PLACEHOLDER.split(shown))
    return re.fullmatch(pattern, " ".join(original.split()), re.S) is not None


def check(sessions: list[Session], tasks: list[str], tools: list[str] | None = None) -> tuple[int, int]:
    """Warm every task; return (calls checked, calls shown under a later turn than the opening)."""
    template = template_from_sessions("t", sessions, min_messages=0)
    by_id = {s.id: s for s in sessions}
    # Scrubbed arguments can coincide (every order id is "<order_id_1>"): a shown call may be any
    # example with its tool and arguments, and its request must be one of theirs.
    examples: dict[tuple[str, bytes], list[Any]] = {}
    for e in template.examples:
        key = (
            e.tool_name,
            orjson.dumps(dict(e.arguments) or {"input": e.raw_arguments}, option=orjson.OPT_SORT_KEYS),
        )
        examples.setdefault(key, []).append(e)
    # The same call made by another past task, whose example this session shows: that past task
    # may offer it, under the message that led to the call there (its session and position).
    made_by: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for episode in template.episodes:
        for step in episode.steps:
            if step.example_session is not None and step.example_position is not None:
                place = (step.example_session, step.example_position)
                made_by.setdefault(place, []).append((episode.session_id, step.position))
    checked = later_turns = 0
    for task in tasks:
        result = warm_conversation(template, task, tools=tools)
        for request, tool, arguments in shown_calls(result.messages):
            # a request it may be shown under -> the first request of the session that asked it
            allowed: dict[str, str] = {}
            for example in examples[(tool, arguments)]:
                places = [
                    (example.session_id, example.position),
                    *made_by.get((example.session_id, example.position), []),
                ]
                for session_id, position in places:
                    session = by_id[session_id]
                    allowed[preceding_user_message(session, position)] = first_request(session)
            found = [text for text in allowed if matches(request, text)]
            assert found, (task, request, list(allowed))
            later_turns += all(text != allowed[text] for text in found)
            checked += 1
    return checked, later_turns


def test_on_the_sample_every_example_is_shown_under_the_message_that_led_to_it(tmp_path: Path) -> None:
    db = generate_sample_db(tmp_path / "state.db", sessions=300, seed=11)
    sessions = list(iter_sessions(db))
    openings = []
    for session in sessions:
        first = next((m.content for m in session.messages if m.role == "user" and m.content), "")
        if first and first not in openings:
            openings.append(first)
    tasks = openings[:: max(1, len(openings) // 10)][:10]  # ten varied requests of the sample
    assert len(set(tasks)) == 10
    checked, _ = check(sessions[40:], tasks)
    assert checked >= 30


def test_on_a_tau2_file_a_later_turns_call_is_shown_under_that_turn() -> None:
    if not TAU2_FILE.is_file():
        pytest.skip(f"the development data is not here ({TAU2_FILE}); CI has it")
    sessions = [s for s in iter_sessions(TAU2_FILE) if s.reward is not None and s.reward >= 1.0]
    tasks = [
        "I want to return a water bottle I got, my name is Ann Lee and my zip is 10001",
        "Can you exchange the keyboard in my last order for one with clicky switches?",
        "Cancel my pending order, I ordered by mistake",
        "What's the status of my order? email ann.lee@example.com",
    ]
    checked, later_turns = check(sessions, tasks)
    assert checked >= 10
    # Retail customers give their name and zip in a later turn: those look-ups are shown under it.
    assert later_turns >= 1
