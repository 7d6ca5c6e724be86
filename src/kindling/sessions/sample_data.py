"""The vocabulary of the sample database: task openings, tool mixes, failure rates, commands.

Kept apart from ``sample.py`` so the generator reads as logic and this file as data. Changing any
value here changes the generated rows, so bump ``sample.SAMPLE_VERSION`` with it.
"""

from __future__ import annotations

# ------------------------------------------------------------------------------------ task text

FILL: dict[str, tuple[str, ...]] = {
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

FIRST_MESSAGES: dict[str, tuple[str, ...]] = {
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

FOLLOW_UPS = (
    "ok, continue",
    "That didn't work, try another approach.",
    "Looks good. Can you also add a short note to the README?",
    "thanks! now run the checks again",
    "Wait, don't touch the config file. Undo that part.",
    "Can you explain what you changed?",
    "great, keep going",
    "Please double-check the edge case with an empty input.",
)

FINAL_REPLIES = (
    "Done. {summary}",
    "All set: {summary}",
    "I've finished. {summary} Let me know if you want changes.",
    "Here's what I did: {summary}",
)

SUMMARIES: dict[str, tuple[str, ...]] = {
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
TOOL_MIX: dict[str, tuple[tuple[str, int], ...]] = {
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

FILES = (
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
COMMANDS_OK = (
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
COMMANDS_FAIL = (
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
QUERIES = ("{a} vs {b} 2026", "{topic} survey", "{lib} changelog breaking changes", "how to {task}")
SITES = (
    "https://docs.python.org/3/library/sqlite3.html",
    "https://www.postgresql.org/docs/current/",
    "https://arxiv.org/abs/2405.01234",
    "https://github.com/pallets/click/releases",
    "https://news.ycombinator.com/item?id=41234567",
    "https://developer.mozilla.org/en-US/docs/Web/API",
)
