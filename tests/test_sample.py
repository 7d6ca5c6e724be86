"""The sample state.db: deterministic, realistic, safe to regenerate, read back by the Hermes reader."""

from __future__ import annotations

import contextlib
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
    CHECKS_FAIL,
    CHECKS_OK,
    CODE_FAIL,
    CODE_OK,
    COMMANDS_FAIL,
    COMMANDS_OK,
    FAILURE_RATE,
    KINDS,
    TOOL_MIX,
)

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


def _kind_of(opening: str, scenario: str) -> str:
    """The kind of work an opening asks for (``KINDS``), found from its text alone."""
    opening = opening.removeprefix("[Continuing after context compression] ")
    opening = opening.split(" (screenshot attached)")[0]
    for template, kind in KINDS.items():
        if re.fullmatch(re.sub(r"\\\{\w+\\\}", ".+", re.escape(template)), opening):
            return kind
    return scenario


def test_calls_work_on_what_the_task_names(sample: Path) -> None:
    # A session's calls belong to its task: a software fix runs tests and git, never systemctl;
    # it edits the module its opening names; a question about a port looks at that port first; an
    # analysis of the user's data never rolls dice; mixed work does what its opening asks (an
    # upgrade never tails a log, a scrape fetches the page it names). (Warm-up shows these calls
    # as examples.)
    scenario = scenarios(sample)
    heads = {name: {c[0].split()[0] for c in COMMANDS_OK[name] + COMMANDS_FAIL[name]} for name in COMMANDS_OK}
    patched = named = port_sessions = port_checked = analyses = scrapes = upgrades = 0
    kinds: Counter[str] = Counter()
    for session in iter_sessions(sample):
        opening = session.messages[0].content or ""
        kind = _kind_of(opening, scenario[session.id])
        kinds[kind] += 1
        calls = [c for m in session.messages for c in m.tool_calls]
        for call in calls:
            if call.name == "terminal":
                assert call.arguments["command"].split()[0] in heads[kind], (kind, call.arguments)
        if kind == "mixed:scrape":
            page = re.search(r"https://\S+", opening)
            assert page is not None
            fetched = [
                c.arguments.get("url") or c.arguments.get("urls")
                for c in calls
                if c.name.startswith(("web_", "browser_"))
            ]
            scrapes += len(fetched)
            assert all(f in (page.group(0), [page.group(0)]) for f in fetched), (opening, fetched)
        if kind == "mixed:upgrade":
            lib = re.search(r"Look up the (\S+) changelog", opening)
            assert lib is not None
            for call in calls:
                if call.name in ("web_search", "patch") and call.arguments.get("path") != "src/app/models.py":
                    upgrades += 1
                    assert lib.group(1) in orjson.dumps(call.arguments).decode(), (opening, call.arguments)
        module = re.search(r"\b(\S+\.(?:py|ts|go))\b", opening)
        if kind == "software" and module:
            edits = [c.arguments["path"] for c in calls if c.name == "patch"]
            patched += len(edits)
            named += sum(path == module.group(1) for path in edits)
        port = re.search(r"port (\d+)", opening)
        if kind == "terminal" and port and any(c.name == "terminal" for c in calls):
            port_sessions += 1
            first = next(c for c in calls if c.name == "terminal")
            port_checked += port.group(1) in first.arguments["command"]
        if kind == "analysis" and re.search(r"\.csv|logs", opening) and "dice" not in opening:
            analyses += 1
            for call in calls:
                if call.name == "execute_code":
                    code = call.arguments["code"]
                    assert not any(w in code for w in ("rolls", "hypot", "linalg.solve")), (opening, code)
    assert patched > 50 and named / patched > 0.9
    assert port_sessions >= 5 and port_checked >= port_sessions * 0.6
    assert analyses > 30
    assert scrapes > 10 and upgrades > 10
    assert {"mixed:tests", "mixed:upgrade", "mixed:scrape", "mixed:logs"} <= set(
        kinds
    ) and "mixed" not in kinds


def _template_regex(template: str, context: dict[str, str]) -> re.Pattern[str]:
    """A template of CODE_OK/CODE_FAIL as a regex: the session's values literal, digits as \\d+."""
    text = template.replace("{{", "{").replace("}}", "}")
    pattern = re.escape(text)
    for key, value in context.items():
        pattern = pattern.replace(re.escape("{" + key + "}"), re.escape(value))
    for key in ("n", "x", "y", "z"):
        pattern = pattern.replace(re.escape("{" + key + "}"), r"\d+")
    return re.compile(pattern + r"\n?")


def test_execute_code_results_follow_their_snippet() -> None:
    # The output printed is the one chosen with the snippet, also when parallel calls run the
    # same snippet (their results are written after all their arguments). Data analysis runs its
    # own snippets; a software fix or mixed work runs quick checks of its own.
    rng = random.Random(5)
    pools = {
        "analysis": (CODE_OK, CODE_FAIL),
        "software": (CHECKS_OK["software"], CHECKS_FAIL["software"]),
        "mixed:scrape": (CHECKS_OK["mixed:scrape"], CHECKS_FAIL["mixed:scrape"]),
    }
    for kind, (ok, failing) in pools.items():
        plan = _plan_sessions(rng, 1)[0]
        plan.scenario = kind.split(":")[0]
        writer = _SessionWriter(rng, plan)
        writer.kind = kind
        for fail, pool in ((False, ok), (True, failing)):
            patterns = [
                (_template_regex(code, writer.context), _template_regex(out, writer.context))
                for code, out in pool
            ]
            calls = [writer._arguments("execute_code", fail) for _ in range(60)]
            assert len({args["code"] for args in calls}) < len(calls)  # some snippets repeat
            seen = set()
            for args in calls:
                result = orjson.loads(writer._result("execute_code", args, fail))
                printed = result["error"] if fail else result["output"]
                index = next(i for i, (code, _) in enumerate(patterns) if code.fullmatch(args["code"]))
                assert patterns[index][1].fullmatch(printed), (args["code"], printed)
                seen.add(index)
            assert len(seen) >= max(1, len(pool) - 1)
        assert all(not pending for pending in writer._code_outputs.values())


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
    # every tool and every command (some commands, like pytest, are in both pools).
    rng = random.Random(11)
    for scenario in sorted(TOOL_MIX):
        plan = _plan_sessions(rng, 1)[0]
        plan.scenario = scenario
        writer = _SessionWriter(rng, plan)
        for tool in sorted(HERMES_TOOLS):
            for _ in range(100):
                # clarify cannot fail (its failure rate is 0): it only asks.
                for fail in (False, True) if FAILURE_RATE[tool] > 0 else (False,):
                    result = writer._result(tool, writer._arguments(tool, fail), fail)
                    assert failed(result) is fail, (scenario, tool, fail, result)


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
