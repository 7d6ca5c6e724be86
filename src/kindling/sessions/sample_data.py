"""The vocabulary of the sample database: the values tasks name, how calls fail, what agents say.

Kept apart from ``sample.py`` so the generator reads as logic and this file as data; the tasks
themselves (each request and the calls it asks for) are in the ``sample_tasks`` package. Changing
any value here changes the generated rows, so bump ``sample.SAMPLE_VERSION`` with it.

Templates name a session's values as ``{placeholder}``: the keys of ``FILL`` and of the entries of
``PROFILES``, one value each per session. Only those names are filled, so code, shell and JSON keep
their own braces as written.
"""

from __future__ import annotations

from typing import Any, NamedTuple

# ------------------------------------------------------------------------------------ call recipes


class Call(NamedTuple):
    """One call a request asks for, with what it gives back.

    ``args`` are the tool's arguments (templates of the session's values). ``out`` is what the call
    gives back when it works: terminal and execute_code output, file contents for read_file, hits for
    search_files (``path:line:text`` lines), ``(title, url, description)`` results for web_search,
    page text for web_extract, the page title for browser_navigate. ``fail`` is how this very call
    fails, when it fails for a reason of its own: ``(exit code, output)`` for terminal, the
    traceback for execute_code, the error for the others; without it the tool's usual failure
    (``FAILS``) is written. ``weight`` is how often the call is made, against the request's others.
    """

    tool: str
    args: dict[str, Any]
    out: Any = ""
    fail: Any = None
    weight: int = 1


class Request(NamedTuple):
    """What a user asks (a template), the calls that answer it, and the agent's reply after them.
    ``weight`` is how often a user asks it next, against the task's other follow-ups."""

    text: str
    calls: tuple[Call, ...]
    reply: str
    weight: int = 1


class Task(NamedTuple):
    """A session's task: its opening request and the requests that may follow in the same session.

    ``needs`` names the profiles whose values the task's templates use (see PROFILES).
    """

    opening: Request
    follow_ups: tuple[Request, ...]
    needs: tuple[str, ...] = ()


def sh(command: str, out: str = "", fail: tuple[int, str] | None = None, weight: int = 1) -> Call:
    """A terminal call: ``command`` prints ``out``; ``fail`` is (exit code, output) when it fails."""
    return Call("terminal", {"command": command}, out, fail, weight)


def read(path: str, content: str, weight: int = 1) -> Call:
    """A read_file call of ``path``, which holds ``content``."""
    return Call("read_file", {"path": path}, content, None, weight)


def write(path: str, content: str, weight: int = 1) -> Call:
    """A write_file call."""
    return Call("write_file", {"path": path, "content": content}, "", None, weight)


def edit(path: str, old: str, new: str, weight: int = 1) -> Call:
    """A patch call replacing ``old`` with ``new`` in ``path``."""
    args = {"mode": "replace", "path": path, "old_string": old, "new_string": new}
    return Call("patch", args, "", None, weight)


def grep(pattern: str, path: str, hits: tuple[str, ...], weight: int = 1) -> Call:
    """A search_files call for text: ``hits`` are ``path:line:text`` lines."""
    return Call("search_files", {"pattern": pattern, "path": path, "target": "content"}, hits, None, weight)


def find(pattern: str, path: str, files: tuple[str, ...], weight: int = 1) -> Call:
    """A search_files call for file names matching a glob: ``files`` are the paths found."""
    return Call("search_files", {"pattern": pattern, "path": path, "target": "files"}, files, None, weight)


def py(code: str, out: str, error: str | None = None, weight: int = 1) -> Call:
    """An execute_code call: ``code`` prints ``out``; ``error`` is its traceback when it fails.
    ``{n}``, ``{x}``, ``{y}`` and ``{z}`` in ``out`` are numbers drawn for each call."""
    return Call("execute_code", {"code": code}, out, error, weight)


def search(query: str, results: tuple[tuple[str, str, str], ...], weight: int = 1) -> Call:
    """A web_search call: ``results`` are (title, url, description)."""
    return Call("web_search", {"query": query}, results, None, weight)


def extract(urls: tuple[str, ...], content: str, weight: int = 1) -> Call:
    """A web_extract call of ``urls``: each page reads ``content``."""
    return Call("web_extract", {"urls": list(urls)}, content, None, weight)


def browse(url: str, title: str, weight: int = 1) -> Call:
    """A browser_navigate call to ``url``, whose page is titled ``title``."""
    return Call("browser_navigate", {"url": url}, title, None, weight)


def remember(content: str, target: str = "user") -> Call:
    """A memory call adding ``content`` (to the user profile, or the agent's own notes)."""
    return Call("memory", {"action": "add", "target": target, "content": content})


def ask(question: str, choices: tuple[str, ...], weight: int = 1) -> Call:
    """A clarify call: the agent asks the user to choose."""
    return Call("clarify", {"question": question, "choices": list(choices)}, "", None, weight)


# What pytest prints when the suite passes, and when the test a bug breaks fails.
PYTEST_OK = "........................                                  [100%]\n24 passed in 1.92s"
PYTEST_FAIL = (
    "F\n=================================== FAILURES ===================================\n"
    "___ {test} ___\n"
    '  File "{module}", line 6, in {func}\n'
    "{exc}\n"
    "=========================== short test summary info ============================\n"
    "FAILED {test_file}::{test} - {exc}\n1 failed, 23 passed in 1.71s"
)


def python_traceback(line: int, error: str) -> str:
    """A Python traceback from a snippet run with execute_code, ending in ``error``."""
    return f'Traceback (most recent call last):\n  File "<stdin>", line {line}, in <module>\n{error}'


# How each tool fails when a call has no failure of its own: (exit code, output) for terminal
# (``{command}`` is the command's first word), the error text for the others.
TERMINAL_FAILS: tuple[tuple[int, str], ...] = (
    (127, "bash: line 1: {command}: command not found"),
    (1, "Error: permission denied"),
    (124, "Command timed out after 60s"),
)
FAILS: dict[str, str] = {
    "read_file": "File not found: {path}",
    "write_file": "Permission denied: {path}",
    "patch": "Could not find a match for old_string in {path}",
    "search_files": "Path not found: {path}",
    "execute_code": "TimeoutError: the code ran longer than 60 seconds and was stopped",
    "web_search": "Search provider returned HTTP 429: rate limited",
    "web_extract": "HTTP 403 Forbidden while fetching {url}",
    "browser_navigate": "net::ERR_CONNECTION_TIMED_OUT at {url}",
    "memory": "Memory is full (2,200/2,200 chars). Remove an entry first.",
}

# Base failure rate per tool in a mid-length session; short sessions fail a little less and
# marathon sessions much less (agents that keep going are the ones whose calls work).
FAILURE_RATE: dict[str, float] = {
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
LENGTH_FACTOR = {"short": 0.85, "mid": 1.0, "marathon": 0.5}

# ------------------------------------------------------------------------------------ the values

# One value of each for the whole session, drawn independently.
FILL: dict[str, tuple[str, ...]] = {
    "dir": ("2024-trip", "screenshots", "family", "scans"),
    "ver": ("1.4.0", "2.0.0", "0.9.3"),
    "src_dir": ("~/projects/notes-app", "./src", "~/code/invoice-service"),
    "csv_dir": ("./data/exports", "~/Documents/reports/2025"),
    "backup_dir": ("~/projects/notes", "~/Documents/reports"),
    "log_dir": ("/var/log/myapp", "./logs"),
}

# Values that belong together, one entry of each profile a task needs per session.
PROFILES: dict[str, tuple[dict[str, str], ...]] = {
    # A data file, one of its numeric columns and a column to group by.
    "data": (
        {"data": "data/events.csv", "data_name": "events.csv", "col": "duration_ms", "by": "device"},
        {"data": "exports/orders_2025.csv", "data_name": "orders_2025.csv", "col": "amount", "by": "country"},
        {"data": "data/signups.csv", "data_name": "signups.csv", "col": "session_length", "by": "channel"},
        {"data": "metrics/daily_active.csv", "data_name": "daily_active.csv", "col": "revenue", "by": "plan"},
        {"data": "reports/sales_q3.csv", "data_name": "sales_q3.csv", "col": "revenue", "by": "signup_month"},
    ),
    "logs": ({"logs": "logs/api-2026-01-*.jsonl"}, {"logs": "logs/requests-*.jsonl"}),
    # A bug in a module, the test that catches it, and the one-line fix.
    "bug": (
        {
            "module": "app/parser.py",
            "import": "app.parser",
            "func": "parse",
            "test": "test_parse_empty_line",
            "test_file": "tests/test_parser.py",
            "regression": "assert parse('') == []",
            "exc": "IndexError: list index out of range",
            "source": "import re\n\n\ndef parse(text):\n    lines = text.splitlines()\n    head = lines[0]\n"
            "    return [line.strip() for line in lines[1:] if line.strip()]\n",
            "old": "head = lines[0]",
            "new": "head = lines[0] if lines else ''",
            "repro": "from app.parser import parse\n\ntry:\n    parse('')\nexcept IndexError as exc:\n    print('IndexError:', exc)",
            "repro_out": "IndexError: list index out of range",
        },
        {
            "module": "src/billing/invoice.py",
            "import": "billing.invoice",
            "func": "total",
            "test": "test_invoice_totals",
            "test_file": "tests/test_invoice.py",
            "regression": "assert total([{'price': 5, 'qty': 2}]) == 10",
            "exc": "KeyError: 'discount'",
            "source": "def total(items):\n    return sum(i['price'] * i['qty'] - i['discount'] for i in items)\n",
            "old": "i['discount']",
            "new": "i.get('discount', 0)",
            "repro": "from billing.invoice import total\n\ntry:\n    total([{'price': 5, 'qty': 2}])\nexcept KeyError as exc:\n    print('KeyError:', exc)",
            "repro_out": "KeyError: 'discount'",
        },
        {
            "module": "utils/dates.py",
            "import": "utils.dates",
            "func": "parse_ts",
            "test": "test_timezone_roundtrip",
            "test_file": "tests/test_dates.py",
            "regression": "assert parse_ts('2026-01-05T10:00:00').tzinfo is not None",
            "exc": "TypeError: can't compare offset-naive and offset-aware datetimes",
            "source": "from datetime import datetime, timezone\n\n\ndef parse_ts(value):\n"
            "    return datetime.fromisoformat(value)\n",
            "old": "return datetime.fromisoformat(value)",
            "new": "return datetime.fromisoformat(value).astimezone(timezone.utc)",
            "repro": "from utils.dates import parse_ts\n\ntry:\n    parse_ts('2026-01-05T10:00:00') < parse_ts('2026-01-05T10:00:00+00:00')\nexcept TypeError as exc:\n    print('TypeError:', exc)",
            "repro_out": "TypeError: can't compare offset-naive and offset-aware datetimes",
        },
        {
            "module": "app/cache.py",
            "import": "app.cache",
            "func": "put",
            "test": "test_cache_eviction",
            "test_file": "tests/test_cache.py",
            "regression": "assert LRUCache(2).size == 2",
            "exc": "AssertionError: assert 3 == 2",
            "source": "class LRUCache:\n    def __init__(self, size):\n        self.size = size\n"
            "        self._items = {}\n\n    def put(self, key, value):\n        self._items[key] = value\n"
            "        if len(self._items) > self.size + 1:\n            self._items.pop(next(iter(self._items)))\n",
            "old": "if len(self._items) > self.size + 1:",
            "new": "if len(self._items) > self.size:",
            "repro": "from app.cache import LRUCache\n\ncache = LRUCache(2)\nfor key in 'abc':\n    cache.put(key, key)\nprint(len(cache._items))",
            "repro_out": "3",
        },
    ),
    # A module whose checks are written out twice.
    "dupe": (
        {"dupe_module": "app/orders.py", "entity": "order", "field": "sku"},
        {"dupe_module": "app/users.py", "entity": "user", "field": "email"},
        {"dupe_module": "app/invoices.py", "entity": "invoice", "field": "customer_id"},
    ),
    "flag": (
        {"flag": "dry-run", "flag_id": "dry_run", "flag_help": "Show what would change without changing it."},
        {"flag": "verbose", "flag_id": "verbose", "flag_help": "Print each step as it runs."},
        {"flag": "since", "flag_id": "since", "flag_help": "Only entries newer than this date."},
        {"flag": "output-format", "flag_id": "output_format", "flag_help": "text or json."},
    ),
    "fmt": (
        {"fmt": "TOML", "reader": "toml_reader", "lib": "tomllib", "sample": 'name = "demo"'},
        {"fmt": "CSV", "reader": "csv_reader", "lib": "csv", "sample": "name,size\ndemo,3"},
        {
            "fmt": "YAML front matter",
            "reader": "front_matter",
            "lib": "yaml",
            "sample": "---\ntitle: demo\n---",
        },
        {
            "fmt": "Apache access log",
            "reader": "access_log",
            "lib": "re",
            "sample": '127.0.0.1 - - "GET / HTTP/1.1" 200',
        },
    ),
    "project": (
        {"project": "the invoice service", "package": "invoice-service", "entry": "invoice"},
        {"project": "our CLI", "package": "notes-cli", "entry": "notes"},
        {"project": "the dotfiles repo", "package": "dotfiles", "entry": "dots"},
    ),
    # Two things worth comparing, and where each documents itself.
    "pair": (
        {
            "a": "PostgreSQL",
            "b": "MySQL",
            "a_doc": "https://www.postgresql.org/docs/current/",
            "b_doc": "https://dev.mysql.com/doc/refman/8.4/en/",
            "pair_slug": "postgresql-vs-mysql",
        },
        {
            "a": "SQLite",
            "b": "DuckDB",
            "a_doc": "https://sqlite.org/whentouse.html",
            "b_doc": "https://duckdb.org/docs/",
            "pair_slug": "sqlite-vs-duckdb",
        },
        {
            "a": "Redis",
            "b": "Valkey",
            "a_doc": "https://redis.io/docs/latest/",
            "b_doc": "https://valkey.io/docs/",
            "pair_slug": "redis-vs-valkey",
        },
        {
            "a": "FastAPI",
            "b": "Flask",
            "a_doc": "https://fastapi.tiangolo.com/",
            "b_doc": "https://flask.palletsprojects.com/",
            "pair_slug": "fastapi-vs-flask",
        },
        {
            "a": "uv",
            "b": "pip-tools",
            "a_doc": "https://docs.astral.sh/uv/",
            "b_doc": "https://pip-tools.readthedocs.io/",
            "pair_slug": "uv-vs-pip-tools",
        },
    ),
    "topic": (
        {
            "topic": "speculative decoding",
            "topic_slug": "speculative-decoding",
            "paper": "https://arxiv.org/abs/2211.17192",
        },
        {
            "topic": "RAG evaluation",
            "topic_slug": "rag-evaluation",
            "paper": "https://arxiv.org/abs/2309.15217",
        },
        {
            "topic": "Rust async runtimes",
            "topic_slug": "rust-async-runtimes",
            "paper": "https://tokio.rs/blog",
        },
        {"topic": "LLM tool use", "topic_slug": "llm-tool-use", "paper": "https://arxiv.org/abs/2302.04761"},
    ),
    "howto": (
        {
            "howto": "pin dependencies in a Python project",
            "howto_doc": "https://packaging.python.org/en/latest/guides/writing-pyproject-toml/",
        },
        {
            "howto": "rotate logs with systemd",
            "howto_doc": "https://www.freedesktop.org/software/systemd/man/latest/journald.conf.html",
        },
        {
            "howto": "deploy a static site",
            "howto_doc": "https://docs.github.com/en/pages/getting-started-with-github-pages",
        },
    ),
    # A service, where it keeps its configuration and log, and what goes wrong with it.
    "service": (
        {
            "service": "nginx",
            "conf": "/etc/nginx/nginx.conf",
            "conf_line": "listen 80;",
            "svc_log": "/var/log/nginx/error.log",
            "svc_error": "bind() to 0.0.0.0:80 failed (98: Address already in use)",
        },
        {
            "service": "postgresql",
            "conf": "/etc/postgresql/16/main/postgresql.conf",
            "conf_line": "shared_buffers = 16GB",
            "svc_log": "/var/log/postgresql/postgresql-16-main.log",
            "svc_error": "could not map anonymous shared memory: Cannot allocate memory",
        },
        {
            "service": "redis-server",
            "conf": "/etc/redis/redis.conf",
            "conf_line": "maxmemory 0",
            "svc_log": "/var/log/redis/redis-server.log",
            "svc_error": "Out Of Memory allocating 1048576 bytes!",
        },
        {
            "service": "caddy",
            "conf": "/etc/caddy/Caddyfile",
            "conf_line": "reverse_proxy localhost:3000",
            "svc_log": "/var/log/caddy/caddy.log",
            "svc_error": "loading config: adapting config using caddyfile: unrecognized directive: reverse_proxi",
        },
    ),
    "pkg": (
        {"pkg": "ripgrep", "run": "rg --version", "version": "ripgrep 14.1.0"},
        {
            "pkg": "ffmpeg",
            "run": "ffmpeg -version | head -n 1",
            "version": "ffmpeg version 6.1.1-3ubuntu5",
        },
        {"pkg": "htop", "run": "htop --version", "version": "htop 3.3.0"},
        {"pkg": "jq", "run": "jq --version", "version": "jq-1.7.1"},
    ),
    # A port, and what holds it.
    "port": (
        {
            "port": "8080",
            "proc": "node",
            "pid": "48121",
            "cmd": "node /srv/dashboard/server.js",
            "unit": "dashboard.service",
        },
        {
            "port": "5432",
            "proc": "postgres",
            "pid": "912",
            "cmd": "/usr/lib/postgresql/16/bin/postgres -D /var/lib/postgresql/16/main",
            "unit": "postgresql@16-main.service",
        },
        {
            "port": "3000",
            "proc": "python3",
            "pid": "23310",
            "cmd": "python3 -m http.server 3000",
            "unit": "devserver.service",
        },
        {
            "port": "6379",
            "proc": "redis-server",
            "pid": "1187",
            "cmd": "/usr/bin/redis-server 127.0.0.1:6379",
            "unit": "redis-server.service",
        },
    ),
    "repo": (
        {
            "repo": "github.com/psf/requests",
            "repo_name": "requests",
            "failing_file": "tests/test_utils.py",
            "failing_test": "test_proxy_env",
        },
        {
            "repo": "github.com/pallets/click",
            "repo_name": "click",
            "failing_file": "tests/test_termui.py",
            "failing_test": "test_progressbar_eta",
        },
        {
            "repo": "github.com/encode/httpx",
            "repo_name": "httpx",
            "failing_file": "tests/test_config.py",
            "failing_test": "test_ssl_env",
        },
    ),
    # A library, the version we are on and the next one, and what broke between them.
    "lib": (
        {
            "lib": "pydantic",
            "broke_key": "import validator",
            "lib_old": "1.10.13",
            "lib_new": "2.10.4",
            "broke": "from pydantic import validator",
            "fixed": "from pydantic import field_validator",
            "lib_error": "ImportError: cannot import name 'validator' from 'pydantic'",
        },
        {
            "lib": "SQLAlchemy",
            "broke_key": "session.query",
            "lib_old": "1.4.52",
            "lib_new": "2.0.36",
            "broke": "rows = session.query(User).all()",
            "fixed": "rows = session.scalars(select(User)).all()",
            "lib_error": "AttributeError: 'Session' object has no attribute 'query'",
        },
        {
            "lib": "numpy",
            "broke_key": "np.float_",
            "lib_old": "1.26.4",
            "lib_new": "2.2.1",
            "broke": "np.float_",
            "fixed": "np.float64",
            "lib_error": "AttributeError: `np.float_` was removed in the NumPy 2.0 release. Use `np.float64` instead.",
        },
        {
            "lib": "httpx",
            "broke_key": "proxies=",
            "lib_old": "0.27.2",
            "lib_new": "0.28.1",
            "broke": "httpx.Client(proxies=PROXY)",
            "fixed": "httpx.Client(proxy=PROXY)",
            "lib_error": "TypeError: Client.__init__() got an unexpected keyword argument 'proxies'",
        },
    ),
    # A page with a table worth scraping.
    "page": (
        {
            "url": "https://example.com/pricing",
            "page_title": "Pricing",
            "columns": "plan,price,seats",
            "row": "Team,12,10",
        },
        {
            "url": "https://status.example.org/history",
            "page_title": "Incident history",
            "columns": "date,service,minutes",
            "row": "2026-01-03,api,42",
        },
        {
            "url": "https://docs.example.dev/limits",
            "page_title": "Rate limits",
            "columns": "endpoint,requests_per_minute",
            "row": "/v1/search,600",
        },
    ),
}

# What the assistant says next to its calls (often nothing), per scenario.
THOUGHTS: dict[str, tuple[str, ...]] = {
    "default": (
        "",
        "",
        "Let me check that first.",
        "I'll look at the relevant files.",
        "Running the tests to see the current state.",
    ),
    "analysis": (
        "",
        "",
        "Let me load the data first.",
        "I'll compute that in Python.",
        "Checking the numbers before I answer.",
    ),
    "research": ("", "", "Let me search for that.", "I'll read the primary sources.", "Checking the docs."),
    "terminal": ("", "", "Let me look at the system first.", "Checking before changing anything."),
}
