"""A deterministic, realistic Hermes-style ``state.db`` for trying kindling without Hermes.

The generated database has Hermes' late schema and looks like months of real use: sessions from the
CLI, Telegram and Discord; short (< 20 messages), mid-length (20-99) and marathon (100+) sessions;
code, file, research, terminal and mixed tasks opened by plausible first user messages; calls of
Hermes' own tools (terminal, read_file, write_file, patch, search_files, execute_code, web_search,
web_extract, browser_navigate, memory, clarify) with realistic arguments and results; a realistic
share of failures (error JSON, tracebacks, ``command not found``, non-zero exit codes) that is
lower in marathon sessions than in mid-length ones; compression chains (parent sessions); a few
compacted rows (``active = 0``) and a few multimodal ``"\\x00json:"`` contents.

The same ``seed`` and ``sessions`` always give the same rows (the file bytes may differ by SQLite
version). ``kindling_sample`` marks the file as a sample, so ``--force`` never replaces a real
Hermes database.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kindling.config import kindling_home
from kindling.errors import StoreError

SAMPLE_VERSION = "1"
BASE_TIME = 1_767_225_600.0  # 2026-01-01T00:00:00Z: fixed so every run yields the same rows

TASK_TYPES: tuple[str, ...] = ("code", "file", "research", "terminal", "mixed")
_TASK_WEIGHTS = (30, 18, 18, 18, 16)
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
CREATE TABLE kindling_sample_tasks (session_id TEXT PRIMARY KEY, task_type TEXT NOT NULL, length TEXT NOT NULL);
"""
_INDEXES = """
CREATE INDEX idx_sessions_source ON sessions(source);
CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX idx_messages_session_id ON messages(session_id, id);
"""

# ------------------------------------------------------------------------------------ task text

_FILL: dict[str, tuple[str, ...]] = {
    "module": (
        "src/billing/invoice.py",
        "app/parser.py",
        "lib/cache.ts",
        "server/routes/users.go",
        "utils/dates.py",
    ),
    "test": (
        "test_parse_empty_line",
        "test_invoice_totals",
        "test_cache_eviction",
        "test_timezone_roundtrip",
    ),
    "exc": ("KeyError", "TypeError: 'NoneType' object is not subscriptable", "IndexError", "a timeout"),
    "flag": ("dry-run", "verbose", "since", "output-format"),
    "fmt": ("TOML", "CSV", "YAML front matter", "Apache access log"),
    "dir": ("2024-trip", "screenshots", "family", "scans"),
    "path": ("~/projects/notes", "./data/exports", "~/Documents/reports", "/var/log/myapp"),
    "ver": ("1.4.0", "2.0.0-rc1", "0.9.3"),
    "project": ("the invoice service", "our CLI", "the dotfiles repo"),
    "a": ("PostgreSQL", "SQLite", "Redis", "FastAPI", "uv", "Poetry"),
    "b": ("MySQL", "DuckDB", "Valkey", "Flask", "pip-tools", "Hatch"),
    "topic": ("speculative decoding", "RAG evaluation", "Rust async runtimes", "WebGPU", "LLM tool use"),
    "service": ("nginx", "postgresql", "docker", "caddy", "redis-server"),
    "pkg": ("ripgrep", "node 22", "ffmpeg", "tailscale", "htop"),
    "port": ("8080", "5432", "3000", "6379"),
    "repo": ("github.com/psf/requests", "github.com/pallets/click", "github.com/encode/httpx"),
    "lib": ("pydantic", "SQLAlchemy", "numpy", "react-router"),
    "url": ("https://example.com/pricing", "https://status.example.org", "https://docs.example.dev/limits"),
    "task": ("pin dependencies in a Python project", "rotate logs with systemd", "deploy a static site"),
}

_FIRST_MESSAGES: dict[str, tuple[str, ...]] = {
    "code": (
        "Fix the failing test in {module}: {test} raises {exc}.",
        "Add a --{flag} option to our CLI in {module} and cover it with tests.",
        "Refactor {module} so the validation logic is not duplicated.",
        "Write a Python function that parses {fmt} files into dataclasses, with unit tests.",
        "Why does {module} throw {exc} when the input is empty? Please debug and fix it.",
        "Implement retry with exponential backoff in {module}.",
    ),
    "file": (
        "Rename every .jpeg in ~/Pictures/{dir} to .jpg.",
        "Find all TODO comments under {path} and list them in TODO.md.",
        "Organise ~/Downloads into folders by file type.",
        "Merge the CSV files in {path} into one file with a single header.",
        "Update the version in pyproject.toml and CHANGELOG.md to {ver}.",
        "Create a README for {project} describing install and usage.",
    ),
    "research": (
        "What are the main differences between {a} and {b}? Give sources.",
        "Research the latest {topic} developments and summarise what changed this year.",
        "Find three papers on {topic} published since 2024 and summarise them.",
        "Compare {a} and {b} for a small team: cost, ops burden, ecosystem.",
        "What's the current recommended way to {task}? Check the official docs.",
    ),
    "terminal": (
        "Check why the {service} service keeps restarting on this box.",
        "Free up disk space, / is at 97%.",
        "Set up a cron job that backs up {path} every night at 2am.",
        "Install {pkg} and make sure it runs.",
        "Which process is listening on port {port}? Kill it.",
        "Show me the {service} error log for the last hour.",
    ),
    "mixed": (
        "Clone {repo}, run its tests and write a summary of the failures to report.md.",
        "Look up the {lib} changelog, then upgrade it in our project and fix what breaks.",
        "Scrape the table from {url} and save it as CSV.",
        "Read the logs in {path}, find the error, search online for it and propose a fix.",
    ),
}

_FOLLOW_UPS = (
    "ok, continue",
    "That didn't work, try another approach.",
    "Looks good. Can you also add a short note to the README?",
    "thanks! now run the checks again",
    "Wait, don't touch the config file. Undo that part.",
    "Can you explain what you changed?",
    "great, keep going",
    "Please double-check the edge case with an empty input.",
)

_FINAL_REPLIES = (
    "Done. {summary}",
    "All set: {summary}",
    "I've finished. {summary} Let me know if you want changes.",
    "Here's what I did: {summary}",
)

_SUMMARIES: dict[str, tuple[str, ...]] = {
    "code": ("the fix is in place and the test suite passes.", "I patched the function and added two tests."),
    "file": ("the files are renamed and nothing was overwritten.", "the list is written to TODO.md."),
    "research": (
        "I summarised the three most relevant sources above.",
        "the comparison is in the table above.",
    ),
    "terminal": (
        "the service is running again and enabled at boot.",
        "I freed 14 GB, mostly old docker images.",
    ),
    "mixed": ("the report is in report.md with links to each failure.", "the CSV is saved and validated."),
}

# ------------------------------------------------------------------------------------- tools

# Which tools each task type reaches for, with weights.
_TOOL_MIX: dict[str, tuple[tuple[str, int], ...]] = {
    "code": (
        ("read_file", 25),
        ("patch", 20),
        ("terminal", 20),
        ("search_files", 14),
        ("write_file", 8),
        ("execute_code", 10),
        ("memory", 2),
        ("clarify", 1),
    ),
    "file": (
        ("read_file", 20),
        ("write_file", 20),
        ("search_files", 25),
        ("terminal", 25),
        ("patch", 8),
        ("clarify", 2),
    ),
    "research": (
        ("web_search", 40),
        ("web_extract", 28),
        ("browser_navigate", 15),
        ("memory", 6),
        ("clarify", 4),
        ("write_file", 7),
    ),
    "terminal": (("terminal", 72), ("read_file", 14), ("search_files", 8), ("memory", 4), ("clarify", 2)),
    "mixed": (
        ("terminal", 20),
        ("read_file", 14),
        ("web_search", 14),
        ("web_extract", 10),
        ("patch", 10),
        ("write_file", 10),
        ("search_files", 8),
        ("execute_code", 6),
        ("browser_navigate", 6),
        ("memory", 2),
    ),
}

# Base failure rate per tool in a mid-length session; short sessions fail a little less and
# marathon sessions much less (agents that keep going are the ones whose calls work).
_FAILURE_RATE: dict[str, float] = {
    "terminal": 0.20,
    "read_file": 0.09,
    "write_file": 0.05,
    "patch": 0.17,
    "search_files": 0.06,
    "execute_code": 0.22,
    "web_search": 0.07,
    "web_extract": 0.14,
    "browser_navigate": 0.12,
    "memory": 0.03,
    "clarify": 0.0,
}
_LENGTH_FACTOR = {"short": 0.85, "mid": 1.0, "marathon": 0.5}

_FILES = (
    "src/app/parser.py",
    "src/app/cli.py",
    "tests/test_parser.py",
    "README.md",
    "pyproject.toml",
    "src/billing/invoice.py",
    "config/settings.yaml",
    "scripts/deploy.sh",
    "docs/usage.md",
)
_COMMANDS_OK = (
    (
        "pytest -x -q tests/",
        "........................                                  [100%]\n24 passed in 1.92s",
    ),
    ("git status --short", " M src/app/parser.py\n?? tests/test_parser_edge.py"),
    (
        "ls -la",
        "total 48\ndrwxr-xr-x  6 user user 4096 Jan  5 10:12 .\n-rw-r--r--  1 user user 1289 Jan  5 10:12 README.md",
    ),
    ("df -h /", "Filesystem      Size  Used Avail Use% Mounted on\n/dev/nvme0n1p2  234G  212G   22G  91% /"),
    (
        "systemctl status nginx --no-pager",
        "● nginx.service - A high performance web server\n   Active: active (running) since Mon 2026-01-05 09:14:02 UTC",
    ),
    ("docker ps --format '{{.Names}}'", "web\nworker\npostgres"),
    ("ss -ltnp | grep 8080", 'LISTEN 0 511 0.0.0.0:8080 0.0.0.0:* users:(("node",pid=48121,fd=21))'),
    ("du -sh ~/Downloads/*", "1.2G\t/home/user/Downloads/ubuntu.iso\n310M\t/home/user/Downloads/videos"),
    ("python -m pip install -e .", "Successfully installed app-0.3.1"),
    (
        "journalctl -u redis-server --since '1 hour ago' --no-pager | tail -n 5",
        "Jan 05 10:01:12 box redis-server[812]: Ready to accept connections tcp",
    ),
)
_COMMANDS_FAIL = (
    ("rg 'def parse' src", 127, "bash: line 1: rg: command not found"),
    (
        "pytest -x -q tests/",
        1,
        'F\n=================================== FAILURES ===================================\n___ test_parse_empty_line ___\nTraceback (most recent call last):\n  File "tests/test_parser.py", line 14, in test_parse_empty_line\n    assert parse("") == []\n  File "src/app/parser.py", line 31, in parse\n    head = lines[0]\nIndexError: list index out of range\n1 failed, 23 passed in 1.71s',
    ),
    ("npm run build", 1, 'npm ERR! Missing script: "build"'),
    (
        "systemctl restart caddy",
        1,
        "Job for caddy.service failed because the control process exited with error code.",
    ),
    ("make deploy", 2, "make: *** No rule to make target 'deploy'.  Stop."),
    ("cat /etc/shadow", 1, "cat: /etc/shadow: Permission denied"),
    (
        "python manage.py migrate",
        1,
        "Traceback (most recent call last):\n  File \"manage.py\", line 22, in <module>\n    main()\nModuleNotFoundError: No module named 'django'",
    ),
)
_QUERIES = ("{a} vs {b} 2026", "{topic} survey", "{lib} changelog breaking changes", "how to {task}")
_SITES = (
    "https://docs.python.org/3/library/sqlite3.html",
    "https://www.postgresql.org/docs/current/",
    "https://arxiv.org/abs/2405.01234",
    "https://github.com/pallets/click/releases",
    "https://news.ycombinator.com/item?id=41234567",
    "https://developer.mozilla.org/en-US/docs/Web/API",
)


@dataclass
class _Plan:
    """What one generated session will look like, decided before any row is written."""

    id: str
    index: int
    source: str
    model: str
    task_type: str
    length: str
    target: int
    started_at: float
    parent_id: str | None = None
    end_reason: str | None = "completed"
    compact: bool = False
    multimodal: bool = False
    rows: list[tuple[Any, ...]] = field(default_factory=list)


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
    from (for evaluating task-type classifiers). Raises StoreError when ``path`` is not a sample."""
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
    path: str | Path | None = None, *, sessions: int = 400, seed: int = 7, overwrite: bool = False
) -> Path:
    """Write a realistic Hermes-style ``state.db`` of ``sessions`` sessions to ``path``; return the path.

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
        _build(Path(tmp_name), sessions=sessions, seed=seed)
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


def _build(path: Path, *, sessions: int, seed: int) -> None:
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
                "INSERT INTO kindling_sample_tasks VALUES (?, ?, ?)", (plan.id, plan.task_type, plan.length)
            )
            for row in plan.rows:
                batch.append((next_id, *row))
                next_id += 1
            plan.rows = []
            if len(batch) >= 20_000:
                _insert_messages(conn, batch)
                batch = []
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
        plan = _Plan(
            id=f"{stamp}_{rng.getrandbits(24):06x}",
            index=index,
            source=_weighted(rng, _SOURCES),
            model=_weighted(rng, _MODELS),
            task_type=rng.choices(TASK_TYPES, weights=_TASK_WEIGHTS)[0],
            length=length,
            target=target,
            started_at=round(clock, 3),
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
            plan.task_type = parent.task_type
            plan.source = parent.source
            plan.model = parent.model
        plans.append(plan)
    return plans


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
        self.factor = _LENGTH_FACTOR[plan.length]

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
        rng = self.rng
        return template.format_map({key: rng.choice(values) for key, values in _FILL.items()})

    def write(self) -> None:
        plan, rng = self.plan, self.rng
        task = self.fill(rng.choice(_FIRST_MESSAGES[plan.task_type]))
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
        while len(plan.rows) < plan.target:
            if 0 <= compact_at <= len(plan.rows):
                self._compact()
                compact_at = -1
            self._turn()
            if len(plan.rows) < plan.target:
                self._row("user", rng.choice(_FOLLOW_UPS))

    def _turn(self) -> None:
        rng, plan = self.rng, self.plan
        rounds = 1 + min(int(rng.expovariate(0.7)), 6)
        # Stay near the planned length so a session ends in the length class it was planned for.
        rounds = max(1, min(rounds, (plan.target - len(plan.rows)) // 3))
        for _ in range(rounds):
            parallel = 1 if rng.random() < 0.85 else rng.randint(2, 3)
            calls = []
            for _ in range(parallel):
                self.call_seq += 1
                tool = _weighted(rng, _TOOL_MIX[plan.task_type])
                fail = self._fails(tool)
                calls.append(
                    (f"call_{plan.index:05d}_{self.call_seq:04d}", tool, self._arguments(tool, fail), fail)
                )
            thought = rng.choice(
                (
                    "",
                    "",
                    "Let me check that first.",
                    "I'll look at the relevant files.",
                    "Running the tests to see the current state.",
                )
            )
            payload = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": tool, "arguments": orjson.dumps(args).decode()},
                }
                for cid, tool, args, _ in calls
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
            for cid, tool, args, fail in calls:
                self._row("tool", self._result(tool, args, fail), call_id=cid, tool=tool)
        summary = rng.choice(_SUMMARIES[plan.task_type])
        self._row("assistant", rng.choice(_FINAL_REPLIES).format(summary=summary), finish="stop")

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

    def _arguments(self, tool: str, fail: bool) -> dict[str, Any]:
        rng = self.rng
        if tool == "terminal":
            # A failing call mostly runs a command that fails for a reason of its own.
            pool = _COMMANDS_FAIL if fail and rng.random() < 0.7 else _COMMANDS_OK
            args: dict[str, Any] = {"command": rng.choice(pool)[0]}
            if rng.random() < 0.3:
                args["timeout"] = rng.choice((60, 120, 300))
            return args
        if tool == "read_file":
            return {"path": rng.choice(_FILES), "offset": 1, "limit": rng.choice((100, 200, 500))}
        if tool == "write_file":
            path = rng.choice(("TODO.md", "report.md", "notes/summary.md", "tests/test_parser_edge.py"))
            return {
                "path": path,
                "content": "# Summary\n\n- " + self.fill("{topic} notes for {project}") + "\n",
            }
        if tool == "patch":
            return {
                "mode": "replace",
                "path": rng.choice(_FILES[:3] + _FILES[5:6]),
                "old_string": "head = lines[0]",
                "new_string": "head = lines[0] if lines else ''",
            }
        if tool == "search_files":
            return {
                "pattern": rng.choice(("TODO", "def parse", "import requests", "timeout=")),
                "path": rng.choice(("src", ".", "tests")),
                "target": "content",
            }
        if tool == "execute_code":
            return {
                "code": "import json, pathlib\ndata = json.loads(pathlib.Path('data.json').read_text())\nprint(len(data))"
            }
        if tool == "web_search":
            return {"query": self.fill(rng.choice(_QUERIES))}
        if tool == "web_extract":
            return {"urls": rng.sample(_SITES, rng.randint(1, 2))}
        if tool == "browser_navigate":
            return {"url": rng.choice(_SITES)}
        if tool == "memory":
            return {
                "action": "add",
                "target": rng.choice(("memory", "user")),
                "content": rng.choice(
                    (
                        "User prefers pytest -x for quick runs.",
                        "Project uses uv, not pip.",
                        "User's server runs Debian 12 with systemd.",
                    )
                ),
            }
        return {
            "question": "Should I overwrite the existing file or write to a new one?",
            "choices": ["overwrite", "new file"],
        }

    def _fails(self, tool: str) -> bool:
        return self.rng.random() < _FAILURE_RATE[tool] * self.factor

    def _result(self, tool: str, args: dict[str, Any], fail: bool) -> str:
        rng = self.rng
        if tool == "terminal":
            command = args["command"]
            for known, code, output in _COMMANDS_FAIL:
                if known == command:
                    return _json({"output": output, "exit_code": code, "error": None})
            if fail:
                code, output = rng.choice(
                    (
                        (127, f"bash: line 1: {command.split()[0]}: command not found"),
                        (1, "Error: permission denied"),
                        (124, "Command timed out after 60s"),
                    )
                )
                return _json({"output": output, "exit_code": code, "error": None})
            output = dict(_COMMANDS_OK).get(command, "ok")
            return _json({"output": output, "exit_code": 0, "error": None})
        if tool == "read_file":
            if fail:
                return _json({"error": f"File not found: {args['path']}"})
            body = "\n".join(
                f"{n:>4}|" + line
                for n, line in enumerate(
                    (
                        "import re",
                        "",
                        "def parse(text):",
                        "    lines = text.splitlines()",
                        "    head = lines[0]",
                        "    return [l.strip() for l in lines[1:]]",
                    ),
                    start=1,
                )
            )
            return _json({"content": body, "total_lines": 6, "file_size": 142, "truncated": False})
        if tool == "write_file":
            if fail:
                return _json({"error": f"Permission denied: {args['path']}"})
            return _json({"bytes_written": len(args["content"]), "dirs_created": False})
        if tool == "patch":
            if fail:
                return _json(
                    {"success": False, "error": "Could not find a match for old_string in " + args["path"]}
                )
            return _json(
                {
                    "success": True,
                    "diff": "-    head = lines[0]\n+    head = lines[0] if lines else ''",
                    "files_modified": [args["path"]],
                }
            )
        if tool == "search_files":
            if fail:
                return _json({"error": "Path not found: " + args["path"]})
            hits = [
                {
                    "path": rng.choice(_FILES),
                    "line": rng.randint(1, 300),
                    "content": args["pattern"] + "(...)",
                }
                for _ in range(rng.randint(0, 4))
            ]
            return _json({"total_count": len(hits), "matches": hits})
        if tool == "execute_code":
            if fail:
                return _json(
                    {
                        "status": "error",
                        "output": "",
                        "error": "Traceback (most recent call last):\n"
                        '  File "<stdin>", line 2, in <module>\nFileNotFoundError: [Errno 2] No such file '
                        "or directory: 'data.json'",
                        "duration_seconds": 0.08,
                    }
                )
            return _json(
                {
                    "status": "success",
                    "output": f"{rng.randint(3, 900)}\n",
                    "tool_calls_made": 0,
                    "duration_seconds": round(rng.uniform(0.05, 3.0), 2),
                }
            )
        if tool == "web_search":
            if fail:
                return _json({"success": False, "error": "Search provider returned HTTP 429: rate limited"})
            results = [
                {
                    "title": f"{args['query'].title()} - result {i}",
                    "url": rng.choice(_SITES),
                    "description": "An overview with benchmarks and migration notes.",
                }
                for i in range(1, 4)
            ]
            return _json({"success": True, "data": {"web": results}})
        if tool == "web_extract":
            if fail:
                return _json(
                    {"success": False, "error": "HTTP 403 Forbidden while fetching " + args["urls"][0]}
                )
            return _json(
                {
                    "results": [
                        {
                            "url": u,
                            "title": "Documentation",
                            "content": "# Overview\n\nKey points: "
                            "stable API, breaking changes listed under 'Migration'.",
                        }
                        for u in args["urls"]
                    ]
                }
            )
        if tool == "browser_navigate":
            if fail:
                return _json({"success": False, "error": "net::ERR_NAME_NOT_RESOLVED at " + args["url"]})
            return _json(
                {
                    "success": True,
                    "url": args["url"],
                    "title": "Docs",
                    "snapshot": '- heading "Docs" [ref=e1]',
                }
            )
        if tool == "memory":
            if fail:
                return _json(
                    {"success": False, "error": "Memory is full (2,200/2,200 chars). Remove an entry first."}
                )
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
