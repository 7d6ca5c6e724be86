"""The sample state.db: deterministic, realistic, safe to regenerate, read back by the Hermes reader."""

from __future__ import annotations

import contextlib
import functools
import random
import re
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from kindling.errors import StoreError
from kindling.mining import TaskType, classify_calls
from kindling.sessions import (
    ReadReport,
    default_sample_path,
    generate_sample_db,
    is_sample_db,
    iter_sessions,
    sample_info,
    sample_task_types,
)
from kindling.sessions.sample import SAMPLE_VERSION, _plan_sessions, _SessionWriter
from kindling.sessions.sample_data import (
    FAILS,
    FAILURE_RATE,
    FILL,
    PROFILES,
    TERMINAL_FAILS,
    Call,
    Request,
    Task,
)
from kindling.sessions.sample_tasks import TASKS

HERMES_TOOLS = {
    "terminal",
    "read_file",
    "write_file",
    "patch",
    "search_files",
    "execute_code",
    "web_search",
    "web_extract",
    "browser_navigate",
    "memory",
    "clarify",
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_sample_db(tmp_path_factory.mktemp("sample") / "state.db", sessions=600, seed=7)


def rows(path: Path) -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return (
            conn.execute("SELECT * FROM sessions ORDER BY id").fetchall()
            + conn.execute("SELECT * FROM messages ORDER BY id").fetchall()
        )
    finally:
        conn.close()


def failed(content: str | None) -> bool:
    """Judge a Hermes tool result the way a person reading it would."""
    data = orjson.loads(content or "{}")
    return bool(
        data.get("error")
        or data.get("success") is False
        or data.get("status") == "error"
        or data.get("exit_code") not in (None, 0)
    )


def length_class(count: int) -> str:
    return "short" if count < 20 else "mid" if count < 100 else "marathon"


def test_same_seed_same_rows_and_another_seed_differs(tmp_path: Path) -> None:
    one = generate_sample_db(tmp_path / "a.db", sessions=40, seed=3)
    two = generate_sample_db(tmp_path / "b.db", sessions=40, seed=3)
    other = generate_sample_db(tmp_path / "c.db", sessions=40, seed=4)
    assert rows(one) == rows(two)
    assert rows(one) != rows(other)
    assert sample_info(one) == {"version": SAMPLE_VERSION, "seed": "3", "sessions": "40"}


def test_reads_back_cleanly_with_realistic_shape(sample: Path) -> None:
    report = ReadReport()
    sessions = list(iter_sessions(sample, report=report))
    # Nothing malformed; the compaction summaries are Hermes's notes, not messages (see hermes.py).
    assert len(sessions) == 600 and report.skipped == {"compaction_summary": compaction_summaries(sample)}
    lengths = Counter(length_class(len(s.messages)) for s in sessions)
    assert all(lengths[name] >= 60 for name in ("short", "mid", "marathon")), lengths
    assert {s.source for s in sessions} >= {"cli", "telegram", "discord"}
    assert {s.end_reason for s in sessions} >= {"completed", "user_exit", "error", "compression"}
    by_id = {s.id: s for s in sessions}
    children = [s for s in sessions if s.parent_id is not None]
    assert children and all(by_id[s.parent_id].end_reason == "compression" for s in children)
    tools = Counter(c.name for s in sessions for m in s.messages for c in m.tool_calls)
    assert set(tools) == HERMES_TOOLS
    assert all(s.messages[0].role == "user" and s.messages[0].content for s in sessions)
    # Every call is answered by exactly one result, so mining can pair all of them.
    assert report.tool_calls == report.tool_results == sum(tools.values())


def scenarios(path: Path) -> dict[str, str]:
    """Each session's scenario, from the sample's own ground truth."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return dict(conn.execute("SELECT session_id, scenario FROM kindling_sample_tasks").fetchall())


def test_task_types_have_ground_truth_and_distinct_first_messages(sample: Path) -> None:
    truth = sample_task_types(sample)
    assert set(task for task, _ in truth.values()) == {"code", "file", "research", "terminal", "mixed"}
    firsts: dict[str, set[str]] = defaultdict(set)
    for session in iter_sessions(sample):
        firsts[truth[session.id][0]].add(session.messages[0].content or "")
    assert all(len(texts) >= 10 for texts in firsts.values())
    assert firsts["code"].isdisjoint(firsts["research"])


def test_every_task_type_occurs_by_the_tool_call_rule(sample: Path) -> None:
    # The definition (a tool family with more than 60% of the calls, else mixed), not the
    # generator's own label, decides: each of the five types must really occur, none dominating.
    truth = sample_task_types(sample)
    by_calls: Counter[str] = Counter()
    agree = 0
    for session in iter_sessions(sample):
        names = [c.name for m in session.messages for c in m.tool_calls]
        kind = classify_calls(names).value
        by_calls[kind] += 1
        agree += kind == truth[session.id][0]
    assert set(by_calls) == {t.value for t in TaskType}
    for kind in ("code", "file", "research", "terminal", "mixed"):
        assert 0.08 < by_calls[kind] / 600 < 0.45, by_calls
    # The planned type is what the calls come out as for most sessions (short sessions with a few
    # calls, and software fixes with a lot of terminal work, may come out mixed).
    assert agree / 600 > 0.8


def test_code_sessions_are_computation_and_fixes_stay_file_work(sample: Path) -> None:
    scenario = scenarios(sample)
    code_kinds: Counter[str] = Counter()
    fix_kinds: Counter[str] = Counter()
    errors: set[str] = set()
    for session in iter_sessions(sample):
        names = [c.name for m in session.messages for c in m.tool_calls]
        kind = classify_calls(names)
        first = (session.messages[0].content or "").lower()
        if kind is TaskType.CODE:
            code_kinds[scenario[session.id]] += 1
            for message in session.messages:
                if message.role == "tool" and message.name == "execute_code":
                    data = orjson.loads(message.content or "{}")
                    if data["status"] == "error":
                        errors.add(data["error"].splitlines()[-1].split(":")[0])
                    else:
                        assert data["output"].strip(), message.content
        if scenario[session.id] == "software":
            fix_kinds[kind.value] += 1
            # A software fix says what it is in its first message.
            assert any(w in first for w in ("fix", "refactor", "implement", "add", "write", "debug")), first
    # Sessions dominated by execute_code are the data-analysis scenario (a few mixed ones may be).
    assert code_kinds["analysis"] >= 0.9 * sum(code_kinds.values()) > 0
    assert {"NameError", "ModuleNotFoundError", "KeyError", "FileNotFoundError"} <= errors
    # Software fixes are file work by the rule (sometimes mixed), never "code".
    assert set(fix_kinds) <= {"file", "mixed", "terminal"} and fix_kinds["file"] > fix_kinds["mixed"]


_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# Every value a placeholder can take in the sample, by name.
_VALUES: dict[str, set[str]] = {key: set(values) for key, values in FILL.items()}
for _entries in PROFILES.values():
    for _entry in _entries:
        for _key, _value in _entry.items():
            _VALUES.setdefault(_key, set()).add(_value)
_NUMBERS = frozenset({"n", "x", "y", "z"})  # drawn for each execute_code output


@functools.lru_cache(maxsize=20_000)
def _regex(template: str, known: tuple[tuple[str, str], ...], numbers: bool) -> re.Pattern[str]:
    """``template`` as a regex: a placeholder already known is its value, another is one of the
    values it can take (the same one where it repeats), a drawn number in execute_code output any
    number; every other character literally."""
    values = dict(known)
    parts, seen, pos = [], set(), 0
    for match in _PLACEHOLDER.finditer(template):
        name = match.group(1)
        parts.append(re.escape(template[pos : match.start()]))
        pos = match.end()
        if numbers and name in _NUMBERS:
            parts.append(r"\d+")
        elif name in values:
            parts.append(re.escape(values[name]))
        elif name in seen:
            parts.append(f"(?P={name})")
        elif name in _VALUES:
            seen.add(name)
            options = sorted(_VALUES[name], key=len, reverse=True)
            parts.append(f"(?P<{name}>{'|'.join(map(re.escape, options))})")
        else:
            parts.append(re.escape(match.group(0)))
    parts.append(re.escape(template[pos:]))
    return re.compile("".join(parts), re.DOTALL)


def _match(
    template: str, text: str, values: dict[str, str], *, numbers: bool = False
) -> dict[str, str] | None:
    """The placeholders' values if ``text`` is ``template`` on values consistent with ``values``."""
    names = set(_PLACEHOLDER.findall(template))
    known = tuple(sorted((k, v) for k, v in values.items() if k in names))
    found = _regex(template, known, numbers).fullmatch(text)
    return None if found is None else {k: v for k, v in found.groupdict().items() if v is not None}


# Arguments an agent adds as it likes: a terminal timeout, a window of the file read.
_OPTIONAL_ARGS = {"terminal": {"timeout"}, "read_file": {"offset", "limit"}}


def _args_fit(recipe: Call, args: dict[str, Any], values: dict[str, str]) -> dict[str, str] | None:
    if set(args) - _OPTIONAL_ARGS.get(recipe.tool, set()) != set(recipe.args):
        return None
    found: dict[str, str] = {}
    for key, expected in recipe.args.items():
        got = args[key]
        pairs = list(zip(expected, got, strict=False)) if isinstance(expected, list) else [(expected, got)]
        if isinstance(expected, list) and (not isinstance(got, list) or len(got) != len(expected)):
            return None
        for want, have in pairs:
            if isinstance(want, str):
                fit = _match(want, have, {**values, **found}) if isinstance(have, str) else None
                if fit is None:
                    return None
                found.update(fit)
            elif want != have:
                return None
    return found


def _result_fits(recipe: Call, args: dict[str, Any], content: str | None, values: dict[str, str]) -> bool:
    """What the tool gave back is what this call gives: its own output, or a failure of its kind."""
    data = orjson.loads(content or "{}")
    if recipe.tool == "terminal":
        code, output = data["exit_code"], data["output"]
        if code == 0:
            return _match(recipe.out, output, values) is not None
        if (
            recipe.fail is not None
            and code == recipe.fail[0]
            and _match(recipe.fail[1], output, values) is not None
        ):
            return True
        first = args["command"].split()[0]
        return any(c == code and _match(o, output, {"command": first}) is not None for c, o in TERMINAL_FAILS)
    if recipe.tool == "execute_code":
        if data["status"] == "success":
            return _match(recipe.out + "\n", data["output"], values, numbers=True) is not None
        return data["error"] == FAILS["execute_code"] or (
            recipe.fail is not None and _match(recipe.fail, data["error"], values) is not None
        )
    if recipe.tool == "read_file" and "content" in data:
        text = "\n".join(line.split("|", 1)[1] for line in data["content"].splitlines())
        # The result lists the file's lines: a last newline leaves no line of its own.
        return any(_match(recipe.out, body, values) is not None for body in (text, text + "\n"))
    return True


def _request_text(content: str) -> str:
    """A user message as its request template reads: without the continuation note or a screenshot."""
    text = content.removeprefix("[Continuing after context compression] ")
    return re.sub(r" \(screenshot attached\)\s*(\[image\])?\s*$", "", text)


def test_every_call_is_one_its_request_asks_for(sample: Path) -> None:
    """Each call is one of the calls its preceding user request lists, on the session's own values,
    and gives back what that call gives. (A question about port 5432 never runs ``df -h``.)"""
    openings = [task for tasks in TASKS.values() for task in tasks]
    calls = results = follow_ups = 0
    for session in iter_sessions(sample):
        values: dict[str, str] = {}
        task: Task | None = None
        request: Request | None = None
        pending: dict[str, tuple[Call, dict[str, Any]]] = {}
        for message in session.messages:
            if message.role == "user":
                text = _request_text(message.content or "")
                if task is None:
                    hits = [
                        (t, t.opening, m)
                        for t in openings
                        if (m := _match(t.opening.text, text, values)) is not None
                    ]
                    assert len(hits) == 1, (session.id, text, [h[1].text for h in hits])
                else:
                    hits = [
                        (task, r, m)
                        for r in task.follow_ups
                        if (m := _match(r.text, text, values)) is not None
                    ]
                    assert hits, (session.id, task.opening.text, text)
                    follow_ups += 1
                task, request, found = hits[0]
                values.update(found)
            for call in message.tool_calls:
                assert request is not None, session.id
                fits = [
                    (r, m)
                    for r in request.calls
                    if r.tool == call.name and (m := _args_fit(r, call.arguments, values)) is not None
                ]
                assert fits, (session.id, request.text, call.name, call.arguments)
                values.update(fits[0][1])
                pending[call.id] = (fits[0][0], call.arguments)
                calls += 1
            if message.role == "tool":
                recipe, args = pending.pop(message.tool_call_id or "")
                assert _result_fits(recipe, args, message.content, values), (
                    session.id,
                    recipe.args,
                    message.content,
                )
                results += 1
        assert not pending, session.id
    assert calls > 10_000 and results == calls and follow_ups > 1_000


def test_each_request_works_on_what_it_names_and_only_on_its_tasks_values() -> None:
    """The recipes themselves: every value a request names is used by its calls, and a task's calls
    use only values its requests name or its profiles give (no pytest failure naming a test in a task
    that has none)."""
    known = set(_VALUES)
    for scenario, tasks in TASKS.items():
        for task in tasks:
            requests = (task.opening, *task.follow_ups)
            named = {n for r in requests for n in _PLACEHOLDER.findall(r.text)} & known
            own = named | {key for name in task.needs for entry in PROFILES[name] for key in entry}
            assert task.follow_ups, task.opening.text  # a session goes on with a request of its task
            for request in requests:
                assert request.calls, request.text
                used: set[str] = set()
                for call in request.calls:
                    text = orjson.dumps([call.args, call.out, call.fail]).decode()
                    names = set(_PLACEHOLDER.findall(text)) & known
                    assert names <= own, (scenario, request.text, call.tool, names - own)
                    used |= names
                asked = set(_PLACEHOLDER.findall(request.text)) & known
                assert asked <= used, (request.text, asked - used)
                assert set(_PLACEHOLDER.findall(request.reply)) & known <= own, request.reply


def test_failures_are_realistic_and_rarer_in_marathon_sessions(sample: Path) -> None:
    calls: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for session in iter_sessions(sample):
        size = length_class(len(session.messages))
        for message in session.messages:
            if message.role == "tool":
                calls[(message.name or "", size)].append(failed(message.content))
    everything = [f for outcomes in calls.values() for f in outcomes]
    assert 0.04 < sum(everything) / len(everything) < 0.25
    kinds = set()
    for session in iter_sessions(sample):
        for message in session.messages:
            if message.role == "tool" and failed(message.content):
                text = message.content or ""
                kinds.update(
                    k for k in ("Traceback", "command not found", '"exit_code":1', '"error"') if k in text
                )
    assert kinds == {"Traceback", "command not found", '"exit_code":1', '"error"'}
    compared = 0
    for tool in HERMES_TOOLS:
        mid, marathon = calls[(tool, "mid")], calls[(tool, "marathon")]
        if len(mid) >= 150 and len(marathon) >= 150 and sum(mid) >= 10:
            assert sum(marathon) / len(marathon) < sum(mid) / len(mid), tool
            compared += 1
    assert compared >= 4


def test_intended_outcomes_are_the_results_written() -> None:
    # A call meant to succeed gets a successful result and one meant to fail a failed one, for
    # every call of every request (some commands, like pytest, can go either way).
    rng = random.Random(11)
    plan = _plan_sessions(rng, 1)[0]
    writer = _SessionWriter(rng, plan)
    checked = 0
    for task in (task for tasks in TASKS.values() for task in tasks):
        for request in (task.opening, *task.follow_ups):
            for call in request.calls:
                # clarify cannot fail (its failure rate is 0): it only asks.
                for fail in (False, True) if FAILURE_RATE[call.tool] > 0 else (False,):
                    for _ in range(8):
                        result = writer._result(call, writer._arguments(call), fail)
                        assert failed(result) is fail, (request.text, call.tool, fail, result)
                        checked += 1
    assert checked > 1000


def compaction_summaries(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(
            conn.execute(
                "SELECT count(*) FROM messages WHERE content LIKE '[CONTEXT COMPACTION]%'"
            ).fetchone()[0]
        )


def test_compacted_rows_and_multimodal_contents(sample: Path) -> None:
    conn = sqlite3.connect(sample)
    try:
        inactive = conn.execute("SELECT count(*) FROM messages WHERE active = 0").fetchone()[0]
        rewound = conn.execute("SELECT count(*) FROM messages WHERE active = 0 AND compacted = 0").fetchone()[
            0
        ]
        total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        # Read as bytes: SQLite's text functions stop at the NUL of "\x00json:".
        blobs = conn.execute("SELECT CAST(content AS BLOB) FROM messages WHERE active = 1").fetchall()
        sentinels = sum(1 for (blob,) in blobs if blob and blob[:6] in (b"\x00json:"[:6], b"\x01json:"[:6]))
        markers = {blob[:1] for (blob,) in blobs if blob and blob[1:6] == b"json:"}
    finally:
        conn.close()
    report = ReadReport()
    sessions = list(iter_sessions(sample, report=report))
    # Compacted rows really ran and are read; a rewound one would not be; summaries are not messages.
    assert inactive > 0 and report.messages == total - rewound - compaction_summaries(sample)
    assert sentinels > 0 and markers == {b"\x00", b"\x01"}
    decoded = [m.content for s in sessions for m in s.messages if m.content and "[image]" in m.content]
    assert len(decoded) == sentinels
    assert not any(
        m.content and m.content.startswith(("\x00json:", "\x01json:")) for s in sessions for m in s.messages
    )


def test_regenerating_is_guarded(tmp_path: Path) -> None:
    target = generate_sample_db(tmp_path / "state.db", sessions=5)
    with pytest.raises(StoreError, match="already exists"):
        generate_sample_db(target, sessions=5)
    generate_sample_db(target, sessions=6, overwrite=True)
    assert sample_info(target) == {"version": SAMPLE_VERSION, "seed": "7", "sessions": "6"}
    real = tmp_path / "real.db"
    conn = sqlite3.connect(real)
    conn.execute("CREATE TABLE sessions (id TEXT)")
    conn.close()
    before = real.read_bytes()
    with pytest.raises(StoreError, match="not a kindling sample"):
        generate_sample_db(real, overwrite=True)
    assert real.read_bytes() == before and not is_sample_db(real)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_default_path_is_under_kindling_home(isolated_homes: Path) -> None:
    assert default_sample_path() == isolated_homes / "kindling" / "sample" / "state.db"
    assert generate_sample_db(sessions=3) == default_sample_path()
    with pytest.raises(ValueError, match="at least 1"):
        generate_sample_db(sessions=0)
