"""A deterministic, realistic Hermes-style ``state.db`` for trying kindling without Hermes.

The generated database has Hermes' late schema and looks like months of real use: sessions from the
CLI, Telegram and Discord; short (< 20 messages), mid-length (20-99) and marathon (100+) sessions;
tasks of every type by the tool-call rule (data analysis done with execute_code, software fixes and
file chores done with file tools, research, system administration, and mixed work), each opened by
a plausible first user message and carried on by the requests a user makes next. Every call is one
its preceding request asks for (the ``sample_tasks`` package lists each request's calls), on the
values the session's task names, with a result that fits the call: Hermes' own tools (terminal, read_file,
write_file, patch, search_files, execute_code, web_search, web_extract, browser_navigate, memory,
clarify), so a warm-up built from the sample shows examples that make sense. A realistic share of
calls fails (error JSON, tracebacks, ``command not found``, non-zero exit codes), less often in
marathon sessions than in mid-length ones; there are compression chains (parent sessions), a few
compacted rows (``active = 0``) and a few multimodal ``"\\x00json:"`` contents.

The same ``seed`` and ``sessions`` always give the same rows (the file bytes may differ by SQLite
version). ``kindling_sample`` marks the file as a sample, so ``--force`` never replaces a real
Hermes database.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import sqlite3
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kindling.config import kindling_home
from kindling.errors import StoreError
from kindling.sessions.sample_data import (
    FAILS,
    FAILURE_RATE,
    FILL,
    LENGTH_FACTOR,
    PROFILES,
    TERMINAL_FAILS,
    THOUGHTS,
    Call,
    Request,
    Task,
)
from kindling.sessions.sample_tasks import SCENARIOS, TASKS

SAMPLE_VERSION = "6"
BASE_TIME = 1_767_225_600.0  # 2026-01-01T00:00:00Z: fixed so every run yields the same rows

TASK_TYPES: tuple[str, ...] = ("code", "file", "research", "terminal", "mixed")
_PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")
_SCENARIO_NAMES = tuple(name for name, _type, _weight in SCENARIOS)
_SCENARIO_WEIGHTS = tuple(weight for _name, _type, weight in SCENARIOS)
_SCENARIO_TYPES = {name: task_type for name, task_type, _weight in SCENARIOS}
_SOURCES = (("cli", 58), ("telegram", 22), ("discord", 14), ("cron", 6))
_MODELS = (
    ("anthropic/claude-sonnet-4.5", 35),
    ("openai/gpt-5", 20),
    ("nousresearch/hermes-4-405b", 20),
    ("google/gemini-2.5-pro", 15),
    ("qwen/qwen3-coder", 10),
)

_SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    title TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE kindling_sample (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE kindling_sample_tasks (
    session_id TEXT PRIMARY KEY, task_type TEXT NOT NULL, length TEXT NOT NULL, scenario TEXT NOT NULL
);
"""
_INDEXES = """
CREATE INDEX idx_sessions_source ON sessions(source);
CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX idx_messages_session_id ON messages(session_id, id);
"""


@dataclass
class _Plan:
    """What one generated session will look like, decided before any row is written."""

    id: str
    index: int
    source: str
    model: str
    scenario: str
    length: str
    target: int
    started_at: float
    task: Task
    # The session's values: one of each FILL placeholder and of each profile (see sample_data.py).
    context: dict[str, str]
    parent_id: str | None = None
    end_reason: str | None = "completed"
    compact: bool = False
    multimodal: bool = False
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def task_type(self) -> str:
        """The task type this session's scenario is meant to have by its calls."""
        return _SCENARIO_TYPES[self.scenario]


def default_sample_path() -> Path:
    """Return where ``kindling sample`` writes by default: ``$KINDLING_HOME/sample/state.db``."""
    return kindling_home() / "sample" / "state.db"


def sample_info(path: str | Path) -> dict[str, str] | None:
    """Return the ``kindling_sample`` marks of ``path`` (version, seed, sessions), or None when the
    file is not a sample kindling generated (or is not a readable SQLite database)."""
    uri = f"file:{urllib.parse.quote(str(Path(path).expanduser().resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error:
        return None
    try:
        rows = conn.execute("SELECT key, value FROM kindling_sample").fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    info = {str(key): str(value) for key, value in rows}
    return info if "version" in info else None


def sample_task_types(path: str | Path) -> dict[str, tuple[str, str]]:
    """Return ``{session_id: (task_type, length_class)}``, the ground truth a sample was generated
    from (for evaluating task-type classifiers). ``task_type`` is the type the session's scenario is
    meant to have by its calls; the calls themselves decide (short sessions and software fixes with
    much terminal work may come out ``mixed``), and the table's ``scenario`` column names what the
    session was (``analysis``, ``software``, ...). Raises StoreError when ``path`` is not a sample."""
    if sample_info(path) is None:
        raise StoreError(f"{path} is not a kindling sample database.", path=path)
    uri = f"file:{urllib.parse.quote(str(Path(path).expanduser().resolve()))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        rows = conn.execute("SELECT session_id, task_type, length FROM kindling_sample_tasks").fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"Cannot read {path}: {exc}.", path=path) from exc
    finally:
        conn.close()
    return {str(sid): (str(task), str(length)) for sid, task, length in rows}


def is_sample_db(path: str | Path) -> bool:
    """True when ``path`` is a database this module generated (it has the ``kindling_sample`` mark)."""
    return sample_info(path) is not None


def generate_sample_db(
    path: str | Path | None = None,
    *,
    sessions: int = 400,
    seed: int = 7,
    overwrite: bool = False,
    on_progress: Callable[[int], None] | None = None,
) -> Path:
    """Write a realistic Hermes-style ``state.db`` of ``sessions`` sessions to ``path``; return the path.

    ``on_progress(n)`` is called as sessions are written (n more each time), for progress bars.

    ``path`` defaults to ``$KINDLING_HOME/sample/state.db``. The file is built next to the target and
    moved into place atomically. An existing file is replaced only with ``overwrite=True`` and only
    when it is itself a kindling sample. Raises StoreError when the file exists (without
    ``overwrite``), is not a sample, or cannot be written; ValueError when ``sessions`` < 1.
    """
    if sessions < 1:
        raise ValueError("sessions must be at least 1")
    target = Path(path).expanduser() if path is not None else default_sample_path()
    if target.exists():
        if not overwrite:
            raise StoreError(f"{target} already exists; use --force to regenerate it.", path=target)
        if not is_sample_db(target):
            raise StoreError(
                f"Refusing to overwrite {target}: it is not a kindling sample database.", path=target
            )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise StoreError(f"Cannot write {target}: {exc.strerror or exc}.", path=target) from exc
    try:
        _build(Path(tmp_name), sessions=sessions, seed=seed, on_progress=on_progress)
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, target)
    except (OSError, sqlite3.Error) as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise StoreError(f"Cannot write {target}: {exc}.", path=target) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    return target


def _build(path: Path, *, sessions: int, seed: int, on_progress: Callable[[int], None] | None = None) -> None:
    rng = random.Random(seed)
    plans = _plan_sessions(rng, sessions)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=OFF")  # a throwaway temp file: durability comes from the rename
        conn.execute("PRAGMA synchronous=OFF")
        conn.executescript(_SCHEMA)
        conn.execute("BEGIN")
        conn.execute("INSERT INTO schema_version VALUES (6)")
        conn.executemany(
            "INSERT INTO kindling_sample VALUES (?, ?)",
            [("version", SAMPLE_VERSION), ("seed", str(seed)), ("sessions", str(sessions))],
        )
        next_id = 1
        batch: list[tuple[Any, ...]] = []
        for plan in plans:
            writer = _SessionWriter(rng, plan)
            writer.write()
            conn.execute(
                "INSERT INTO sessions (id, source, user_id, model, model_config, system_prompt, "
                "parent_session_id, started_at, ended_at, end_reason, message_count, tool_call_count, "
                "input_tokens, output_tokens, title) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                writer.session_row(),
            )
            conn.execute(
                "INSERT INTO kindling_sample_tasks VALUES (?, ?, ?, ?)",
                (plan.id, plan.task_type, plan.length, plan.scenario),
            )
            for row in plan.rows:
                batch.append((next_id, *row))
                next_id += 1
            plan.rows = []
            if len(batch) >= 20_000:
                _insert_messages(conn, batch)
                batch = []
            if on_progress is not None:
                on_progress(1)
        _insert_messages(conn, batch)
        conn.execute("COMMIT")
        conn.executescript(_INDEXES)
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()


def _insert_messages(conn: sqlite3.Connection, batch: list[tuple[Any, ...]]) -> None:
    conn.executemany(
        "INSERT INTO messages (id, session_id, role, content, tool_call_id, tool_calls, tool_name, "
        "timestamp, token_count, finish_reason, reasoning, active, compacted) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        batch,
    )


def _weighted(rng: random.Random, options: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([name for name, _ in options], weights=[w for _, w in options])[0]


def _plan_sessions(rng: random.Random, count: int) -> list[_Plan]:
    plans: list[_Plan] = []
    clock = BASE_TIME
    for index in range(count):
        clock += rng.uniform(600, 9 * 3600)
        roll = rng.random()
        if roll < 0.42:
            length, target = "short", rng.randint(4, 16)
        elif roll < 0.80:
            length, target = "mid", rng.randint(22, 92)
        else:
            length, target = "marathon", rng.randint(100, 500)
        stamp = _stamp(clock)
        scenario = rng.choices(_SCENARIO_NAMES, weights=_SCENARIO_WEIGHTS)[0]
        plan = _Plan(
            id=f"{stamp}_{rng.getrandbits(24):06x}",
            index=index,
            source=_weighted(rng, _SOURCES),
            model=_weighted(rng, _MODELS),
            scenario=scenario,
            length=length,
            target=target,
            started_at=round(clock, 3),
            task=rng.choice(TASKS[scenario]),
            context=_draw_context(rng),
        )
        end = rng.random()
        plan.end_reason = (
            "completed" if end < 0.72 else "user_exit" if end < 0.86 else "error" if end < 0.93 else None
        )
        plan.multimodal = rng.random() < 0.03
        plan.compact = length == "marathon" and rng.random() < 0.2
        # A compression continuation: the previous session was cut by context compression and this
        # one carries on the same task.
        if plans and rng.random() < 0.07 and plans[-1].parent_id is None:
            parent = plans[-1]
            parent.end_reason = "compression"
            plan.parent_id = parent.id
            plan.scenario = parent.scenario
            plan.task = parent.task
            plan.context = parent.context
            plan.source = parent.source
            plan.model = parent.model
        plans.append(plan)
    return plans


def _draw_context(rng: random.Random) -> dict[str, str]:
    """One value of each FILL placeholder and one entry of each profile, for a whole session."""
    context = {key: rng.choice(values) for key, values in FILL.items()}
    for entries in PROFILES.values():
        context.update(rng.choice(entries))
    return context


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` that ``values`` holds replaced; any other brace is kept."""
    return _PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _stamp(epoch: float) -> str:
    return time.strftime("%Y%m%d_%H%M%S", time.gmtime(epoch))


class _SessionWriter:
    """Produces one session's message rows following its plan."""

    def __init__(self, rng: random.Random, plan: _Plan) -> None:
        self.rng = rng
        self.plan = plan
        self.clock = plan.started_at
        self.call_seq = 0
        self.tool_calls = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.first_text = ""
        self.factor = LENGTH_FACTOR[plan.length]
        self.context = plan.context
        # The request the calls now answer: the opening, then each follow-up the user sends.
        self.request: Request = plan.task.opening

    # rows are (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp,
    #           token_count, finish_reason, reasoning, active, compacted)
    def _row(
        self,
        role: str,
        content: str | None,
        *,
        call_id: str | None = None,
        calls: str | None = None,
        tool: str | None = None,
        finish: str | None = None,
        reasoning: str | None = None,
    ) -> None:
        self.clock += self.rng.uniform(0.4, 25.0) if role != "user" else self.rng.uniform(5, 240)
        tokens = max(1, len(content or "") // 4 + (len(calls) // 4 if calls else 0))
        if role == "assistant":
            self.tokens_out += tokens
        else:
            self.tokens_in += tokens
        self.plan.rows.append(
            (
                self.plan.id,
                role,
                content,
                call_id,
                calls,
                tool,
                round(self.clock, 3),
                tokens,
                finish,
                reasoning,
                1,
                0,
            )
        )

    def fill(self, template: str) -> str:
        """``template`` on this session's values."""
        return fill_template(template, self.context)

    def _filled(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.fill(value)
        if isinstance(value, list):
            return [self._filled(item) for item in value]
        return value

    def write(self) -> None:
        plan, rng = self.plan, self.rng
        task = self.fill(plan.task.opening.text)
        if plan.parent_id is not None:
            task = "[Continuing after context compression] " + task
        self.first_text = task
        if plan.multimodal:
            parts = [
                {"type": "text", "text": task + " (screenshot attached)"},
                {
                    "type": "image_url",
                    "image_url": {
                        "url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
                    },
                },
            ]
            marker = "\x00json:" if rng.random() < 0.5 else "\x01json:"
            self._row("user", marker + orjson.dumps(parts).decode())
        else:
            self._row("user", task)
        compact_at = rng.randint(30, 60) if plan.compact else -1
        follow_ups = plan.task.follow_ups
        while len(plan.rows) < plan.target:
            if 0 <= compact_at <= len(plan.rows):
                self._compact()
                compact_at = -1
            self._turn()
            if len(plan.rows) < plan.target:
                # The user's next request, and the calls that answer it from now on.
                self.request = rng.choices(follow_ups, weights=[r.weight for r in follow_ups])[0]
                self._row("user", self.fill(self.request.text))

    def _turn(self) -> None:
        rng, plan = self.rng, self.plan
        rounds = 1 + min(int(rng.expovariate(0.7)), 6)
        # Stay near the planned length so a session ends in the length class it was planned for.
        rounds = max(1, min(rounds, (plan.target - len(plan.rows)) // 3))
        options = self.request.calls
        weights = [call.weight for call in options]
        for _ in range(rounds):
            parallel = 1 if rng.random() < 0.85 else rng.randint(2, 3)
            calls = []
            for _ in range(parallel):
                self.call_seq += 1
                call = rng.choices(options, weights=weights)[0]
                fail = rng.random() < FAILURE_RATE[call.tool] * self.factor
                calls.append(
                    (f"call_{plan.index:05d}_{self.call_seq:04d}", call, self._arguments(call), fail)
                )
            thought = rng.choice(THOUGHTS.get(plan.scenario, THOUGHTS["default"]))
            payload = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": call.tool, "arguments": orjson.dumps(args).decode()},
                }
                for cid, call, args, _ in calls
            ]
            self._row(
                "assistant",
                thought or None,
                calls=orjson.dumps(payload).decode(),
                finish="tool_calls",
                reasoning="The user wants this done carefully; check before changing."
                if rng.random() < 0.2
                else None,
            )
            self.tool_calls += len(calls)
            for cid, call, args, fail in calls:
                self._row("tool", self._result(call, args, fail), call_id=cid, tool=call.tool)
        reply = self.fill(self.request.reply)
        self._row("assistant", rng.choice(("", "", "Done. ", "All set. ")) + reply, finish="stop")

    def _compact(self) -> None:
        # Hermes compaction: the rows so far stay on disk with active=0 and a summary replaces them.
        rows = self.plan.rows
        for i in range(1, len(rows)):
            rows[i] = (*rows[i][:10], 0, 1)
        self._row(
            "user",
            "[CONTEXT COMPACTION] Earlier turns were summarised: the user asked: "
            + self.first_text
            + " Work so far: files inspected, first fixes applied, checks run.",
        )

    def _arguments(self, call: Call) -> dict[str, Any]:
        """The call's arguments on this session's values, with the optional ones agents often add."""
        args: dict[str, Any] = {key: self._filled(value) for key, value in call.args.items()}
        if call.tool == "terminal" and self.rng.random() < 0.3:
            args["timeout"] = self.rng.choice((60, 120, 300))
        elif call.tool == "read_file" and self.rng.random() < 0.5:
            args.update(offset=1, limit=self.rng.choice((100, 200, 500)))
        return args

    def _result(self, call: Call, args: dict[str, Any], fail: bool) -> str:
        """What the tool gave back: the call's own output, or how it failed."""
        rng, tool = self.rng, call.tool
        where = {
            "path": str(args.get("path", "")),
            "url": str(args.get("url") or (args.get("urls") or [""])[0]),
        }
        if tool == "terminal":
            if fail:
                # A command that fails for a reason of its own mostly says so; else it fails as any may.
                if call.fail is not None and rng.random() < 0.7:
                    code, output = call.fail
                    return _json({"output": self.fill(output), "exit_code": code, "error": None})
                code, output = rng.choice(TERMINAL_FAILS)
                output = fill_template(output, {"command": args["command"].split()[0]})
                return _json({"output": output, "exit_code": code, "error": None})
            return _json({"output": self.fill(call.out), "exit_code": 0, "error": None})
        if tool == "execute_code":
            if fail:
                error = self.fill(call.fail) if call.fail is not None else FAILS["execute_code"]
                return _json(
                    {
                        "status": "error",
                        "output": "",
                        "error": error,
                        "duration_seconds": round(rng.uniform(0.02, 0.9), 2),
                    }
                )
            numbers = {
                "n": str(rng.randint(1_000, 90_000)),
                **{key: str(rng.randint(1, 9)) for key in ("x", "y", "z")},
            }
            output = fill_template(self.fill(call.out), numbers)
            return _json(
                {
                    "status": "success",
                    "output": output + "\n",
                    "tool_calls_made": 0,
                    "duration_seconds": round(rng.uniform(0.05, 3.0), 2),
                }
            )
        if fail and tool in FAILS:
            error = fill_template(FAILS[tool], where)
            if tool in ("patch", "web_search", "web_extract", "browser_navigate", "memory"):
                return _json({"success": False, "error": error})
            return _json({"error": error})
        if tool == "read_file":
            lines = self.fill(call.out).splitlines()
            body = "\n".join(f"{n:>4}|{line}" for n, line in enumerate(lines, start=1))
            return _json(
                {"content": body, "total_lines": len(lines), "file_size": len(body), "truncated": False}
            )
        if tool == "write_file":
            return _json({"bytes_written": len(args["content"].encode()), "dirs_created": False})
        if tool == "patch":
            return _json(
                {
                    "success": True,
                    "diff": f"-{args['old_string']}\n+{args['new_string']}",
                    "files_modified": [args["path"]],
                }
            )
        if tool == "search_files":
            found = [self.fill(hit) for hit in call.out]
            if args.get("target") == "files":
                return _json({"total_count": len(found), "files": found})
            matches = []
            for hit in found:
                path, line, text = hit.split(":", 2)
                matches.append({"path": path, "line": int(line), "content": text})
            return _json({"total_count": len(matches), "matches": matches})
        if tool == "web_search":
            results = [
                {"title": self.fill(title), "url": self.fill(url), "description": self.fill(about)}
                for title, url, about in call.out
            ]
            return _json({"success": True, "data": {"web": results}})
        if tool == "web_extract":
            content = self.fill(call.out)
            return _json(
                {
                    "results": [
                        {"url": u, "title": content.splitlines()[0].lstrip("# "), "content": content}
                        for u in args["urls"]
                    ]
                }
            )
        if tool == "browser_navigate":
            title = self.fill(call.out)
            return _json(
                {
                    "success": True,
                    "url": args["url"],
                    "title": title,
                    "snapshot": f'- heading "{title}" [ref=e1]',
                }
            )
        if tool == "memory":
            return _json({"success": True, "message": "Entry added.", "usage": "1,024/2,200 chars"})
        return _json(
            {
                "question": args["question"],
                "choices_offered": args["choices"],
                "user_response": rng.choice(args["choices"]),
            }
        )

    def session_row(self) -> tuple[Any, ...]:
        plan = self.plan
        ended = None if plan.end_reason is None else round(self.clock + self.rng.uniform(1, 60), 3)
        title = self.first_text[:60]
        live = sum(1 for row in plan.rows if row[10] == 1)
        return (
            plan.id,
            plan.source,
            None if plan.source == "cli" else f"user{plan.index % 37:03d}",
            plan.model,
            _json({"temperature": 0.7, "max_tokens": 8192}),
            None,
            plan.parent_id,
            plan.started_at,
            ended,
            plan.end_reason,
            live,
            self.tool_calls,
            self.tokens_in,
            self.tokens_out,
            title,
        )


def _json(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")
