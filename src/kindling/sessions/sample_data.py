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
    "data": (
        "data/events.csv",
        "exports/orders_2025.csv",
        "data/signups.csv",
        "metrics/daily_active.csv",
        "sales_q3.csv",
    ),
    "logs": ("logs/*.json", "logs/api-2026-01-*.jsonl", "/var/log/myapp/access.log"),
    "col": ("amount", "duration_ms", "age", "revenue", "session_length"),
    "by": ("country", "plan", "signup_month", "device", "channel"),
}

# The scenarios the generator plays, the task type each is meant to be by the calls it makes (the
# issue's rule: a tool family with more than 60% of the calls, else mixed), and how common each is.
# Software fixes are done with read_file/patch/search_files plus some terminal, so they come out
# ``file`` (or ``mixed`` when the terminal share grows); ``code`` is computation with execute_code.
SCENARIOS: tuple[tuple[str, str, int], ...] = (
    ("analysis", "code", 17),
    ("software", "file", 20),
    ("file", "file", 13),
    ("research", "research", 17),
    ("terminal", "terminal", 17),
    ("mixed", "mixed", 16),
)

FIRST_MESSAGES: dict[str, tuple[str, ...]] = {
    "analysis": (
        "Compute the monthly churn from {data}.",
        "Plot latency percentiles (p50/p95/p99) from {logs} and save the chart as latency.png.",
        "Fit a linear model of {col} against {by} in {data} and tell me the coefficients.",
        "What's the average {col} per {by} in {data}?",
        "Calculate the correlation between {col} and the other numeric columns of {data}.",
        "Simulate 10,000 rolls of two dice and show the distribution of the sum.",
        "How many rows of {data} have a missing {col}? Drop them and give me summary statistics.",
        "Estimate pi with a Monte Carlo simulation in numpy, 1e6 samples.",
        "Count the requests per hour in {logs} and show the busiest hours.",
        "Solve this system of equations: 3x + 2y = 12, x - y = 1.",
        "Give me the top 10 {by} values by total {col} in {data}.",
        "Is {col} in {data} normally distributed? Draw a histogram and run a Shapiro test.",
        "Load {data} with pandas and run a quick exploratory analysis.",
        "Forecast next month's {col} from the weekly totals in {data}.",
    ),
    "software": (
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

# The mixed scenario's openings each ask for their own kind of work, so each draws its calls from
# pools of its own (``TOOL_MIX["mixed:upgrade"]``, ...): an upgrade reads a changelog and patches
# requirements, a scrape fetches the page it names. Any other opening's kind is its scenario.
KINDS: dict[str, str] = {
    "Clone {repo}, run its tests and write a summary of the failures to report.md.": "mixed:tests",
    "Look up the {lib} changelog, then upgrade it in our project and fix what breaks.": "mixed:upgrade",
    "Scrape the table from {url} and save it as CSV.": "mixed:scrape",
    "Read the logs in {path}, find the error, search online for it and propose a fix.": "mixed:logs",
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
}

FINAL_REPLIES = (
    "Done. {summary}",
    "All set: {summary}",
    "I've finished. {summary} Let me know if you want changes.",
    "Here's what I did: {summary}",
)

SUMMARIES: dict[str, tuple[str, ...]] = {
    "analysis": (
        "the numbers are in the table above; the script is in analysis.py.",
        "the chart is saved and the key figures are listed above.",
    ),
    "software": (
        "the fix is in place and the test suite passes.",
        "I patched the function and added two tests.",
    ),
    "file": ("the files are renamed and nothing was overwritten.", "the list is written to TODO.md."),
    "research": (
        "I summarised the three most relevant sources above.",
        "the comparison is in the table above.",
    ),
    "terminal": (
        "the service is running again and enabled at boot.",
        "I freed 14 GB, mostly old docker images.",
    ),
    "mixed:tests": (
        "the report is in report.md with links to each failure.",
        "3 tests fail; report.md says why.",
    ),
    "mixed:upgrade": (
        "it is upgraded, and the one breaking change is fixed.",
        "the tests pass on the new version.",
    ),
    "mixed:scrape": (
        "the CSV is saved and validated.",
        "the table is in table.csv, one row per line of the page.",
    ),
    "mixed:logs": (
        "the error is a connection reset; the fix is a longer timeout.",
        "the fix is proposed above.",
    ),
}

# ------------------------------------------------------------------------------------- tools

# Which tools each task type reaches for, with weights.
TOOL_MIX: dict[str, tuple[tuple[str, int], ...]] = {
    "analysis": (
        ("execute_code", 80),
        ("read_file", 7),
        ("terminal", 6),
        ("write_file", 4),
        ("memory", 2),
        ("clarify", 1),
    ),
    "software": (
        ("read_file", 30),
        ("patch", 24),
        ("terminal", 17),
        ("search_files", 15),
        ("write_file", 8),
        ("execute_code", 3),
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
    "mixed:tests": (
        ("terminal", 38),
        ("read_file", 20),
        ("search_files", 14),
        ("write_file", 14),
        ("web_search", 6),
        ("execute_code", 6),
        ("memory", 2),
    ),
    "mixed:upgrade": (
        ("web_search", 20),
        ("web_extract", 14),
        ("terminal", 24),
        ("patch", 16),
        ("read_file", 14),
        ("search_files", 8),
        ("execute_code", 4),
    ),
    "mixed:scrape": (
        ("browser_navigate", 18),
        ("web_extract", 22),
        ("execute_code", 30),
        ("write_file", 14),
        ("terminal", 12),
        ("read_file", 4),
    ),
    "mixed:logs": (
        ("read_file", 24),
        ("search_files", 18),
        ("terminal", 24),
        ("web_search", 20),
        ("web_extract", 10),
        ("patch", 4),
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

# What each scenario's calls work on. Every template takes the session's own values (``FILL``),
# so a call works on what the task's opening names; the generator prefers an option naming a value
# the opening names ("Which process is listening on port {port}?" -> ``ss -ltnp | grep :{port}``).
# Commands that succeed: (command, what it printed).
COMMANDS_OK: dict[str, tuple[tuple[str, str], ...]] = {
    "analysis": (
        (
            "head -n 3 {data}",
            "id,user_id,{col},{by},created_at,status\n1,1042,12.5,A,2025-07-01,active\n2,1077,8.0,B,2025-07-01,active",
        ),
        ("wc -l {data}", "48213 {data}"),
        ("python -c 'import pandas, numpy; print(pandas.__version__, numpy.__version__)'", "2.2.3 2.1.3"),
    ),
    "software": (
        (
            "pytest -x -q tests/",
            "........................                                  [100%]\n24 passed in 1.92s",
        ),
        (
            "pytest -x -q tests/ -k {test}",
            ".                                                         [100%]\n1 passed, 23 deselected in 0.38s",
        ),
        ("git status --short", " M {module}\n?? tests/test_edge_cases.py"),
        ("git diff --stat", " {module} | 4 ++--\n 1 file changed, 2 insertions(+), 2 deletions(-)"),
        ("python -m pip install -e .", "Successfully installed app-0.3.1"),
    ),
    "file": (
        (
            "ls -la {path}",
            "total 48\ndrwxr-xr-x  6 user user 4096 Jan  5 10:12 .\n-rw-r--r--  1 user user 1289 Jan  5 10:12 index.md",
        ),
        ("find ~/Pictures/{dir} -name '*.jpeg' | wc -l", "37"),
        ("du -sh ~/Downloads/*", "1.2G\t/home/user/Downloads/ubuntu.iso\n310M\t/home/user/Downloads/videos"),
        ("head -qn 1 {path}/*.csv | sort -u", "id,name,amount"),
        (
            "git diff --stat",
            " pyproject.toml | 2 +-\n CHANGELOG.md   | 4 ++++\n 2 files changed, 5 insertions(+), 1 deletion(-)",
        ),
    ),
    "terminal": (
        (
            "systemctl status {service} --no-pager",
            "● {service}.service\n   Active: active (running) since Mon 2026-01-05 09:14:02 UTC",
        ),
        (
            "journalctl -u {service} --since '1 hour ago' --no-pager | tail -n 3",
            "Jan 05 10:01:12 box {service}[812]: worker process exited on signal 9\n"
            "Jan 05 10:01:13 box systemd[1]: {service}.service: Scheduled restart job, restart counter is at 5.",
        ),
        (
            "df -h /",
            "Filesystem      Size  Used Avail Use% Mounted on\n/dev/nvme0n1p2  234G  227G  7.0G  97% /",
        ),
        ("du -sh /var/lib/docker /var/log", "14G\t/var/lib/docker\n2.1G\t/var/log"),
        ("ss -ltnp | grep :{port}", 'LISTEN 0 511 0.0.0.0:{port} 0.0.0.0:* users:(("node",pid=48121,fd=21))'),
        ("kill 48121 && sleep 1 && ss -ltn | grep -c :{port}", "0"),
        ("sudo apt-get install -y {pkg}", "Setting up {pkg} ...\nProcessing triggers for man-db ..."),
        ("crontab -l", "0 2 * * * tar czf /backup/nightly.tgz {path}"),
    ),
    "research": (("curl -sI {url} | head -n 1", "HTTP/2 200"),),
    "mixed:tests": (
        ("git clone --depth 1 https://{repo} repo", "Cloning into 'repo'...\ndone."),
        ("cd repo && pip install -e '.[test]'", "Successfully installed {repo} (editable)"),
        (
            "cd repo && pytest -q -rf | tail -n 3",
            "FAILED tests/test_utils.py::test_proxy_env\n3 failed, 120 passed",
        ),
    ),
    "mixed:upgrade": (
        ("pip show {lib} | head -n 2", "Name: {lib}\nVersion: 1.9.0"),
        ("pip install -U {lib}", "Successfully installed {lib}-2.0.0"),
        (
            "pytest -x -q tests/",
            "........................                                  [100%]\n24 passed in 1.92s",
        ),
    ),
    "mixed:scrape": (
        ("curl -s {url} | head -n 2", '<!doctype html>\n<html lang="en">'),
        ("head -n 3 table.csv", "plan,price,seats\nStarter,0,1\nTeam,12,10"),
    ),
    "mixed:logs": (
        ("tail -n 2 {path}/app.log", "ERROR Connection reset by peer\nERROR retry budget exhausted"),
        ("grep -c ERROR {path}/app.log", "14"),
        ("ls -la {path}", "total 12\n-rw-r--r--  1 user user 20480 Jan  5 10:02 app.log"),
    ),
}
# Commands that fail for a reason of their own: (command, exit code, what it printed).
COMMANDS_FAIL: dict[str, tuple[tuple[str, int, str], ...]] = {
    "analysis": (
        (
            "python analysis.py",
            1,
            'Traceback (most recent call last):\n  File "analysis.py", line 1, in <module>\n'
            "    import pandas as pd\nModuleNotFoundError: No module named 'pandas'",
        ),
    ),
    "software": (
        ("rg 'def parse' src", 127, "bash: line 1: rg: command not found"),
        (
            "pytest -x -q tests/",
            1,
            "F\n=================================== FAILURES ===================================\n___ {test} ___\n"
            'Traceback (most recent call last):\n  File "{module}", line 31, in parse\n    head = lines[0]\n'
            "{exc}\n1 failed, 23 passed in 1.71s",
        ),
        ("npm run build", 1, 'npm ERR! Missing script: "build"'),
    ),
    "file": (
        ("rg -n TODO {path}", 127, "bash: line 1: rg: command not found"),
        (
            "mv ~/Pictures/{dir}/*.jpeg ~/Pictures/{dir}/jpg/",
            1,
            "mv: target '/home/user/Pictures/{dir}/jpg/' is not a directory",
        ),
    ),
    "terminal": (
        (
            "systemctl restart {service}",
            1,
            "Job for {service}.service failed because the control process exited with error code.",
        ),
        ("cat /etc/shadow", 1, "cat: /etc/shadow: Permission denied"),
        ("kill 48121", 1, "bash: kill: (48121) - Operation not permitted"),
    ),
    "research": (("curl -sI {url}", 6, "curl: (6) Could not resolve host"),),
    "mixed:tests": (
        ("cd repo && pytest -q", 1, "..F.....F........F.\n3 failed, 120 passed in 8.41s"),
        ("cd repo && make test", 2, "make: *** No rule to make target 'test'.  Stop."),
        (
            "git clone https://{repo}",
            128,
            "fatal: destination path 'repo' already exists and is not an empty directory.",
        ),
    ),
    "mixed:upgrade": (
        (
            "pytest -x -q tests/",
            1,
            "F\n=================================== FAILURES ===================================\n"
            "ImportError: cannot import name 'validator' from '{lib}'\n1 failed, 23 passed in 1.84s",
        ),
        (
            "python -c 'import {lib}'",
            1,
            'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
            "ModuleNotFoundError: No module named '{lib}'",
        ),
    ),
    "mixed:scrape": (("curl -s {url}", 6, "curl: (6) Could not resolve host"),),
    "mixed:logs": (
        ("tail -n 2 {path}/error.log", 1, "tail: cannot open '{path}/error.log': No such file or directory"),
    ),
}
# Files each scenario reads (and where its searches find things).
READ_PATHS: dict[str, tuple[str, ...]] = {
    "analysis": ("{data}", "analysis.py"),
    "software": ("{module}", "{module}", "tests/test_parser.py", "pyproject.toml"),
    "file": ("README.md", "pyproject.toml", "CHANGELOG.md", "{path}/index.md"),
    "terminal": ("/etc/{service}/{service}.conf", "/var/log/syslog"),
    "research": ("notes/{topic}.md",),
    "mixed:tests": ("repo/README.md", "repo/tests/test_utils.py", "repo/pyproject.toml"),
    "mixed:upgrade": ("requirements.txt", "src/app/models.py", "CHANGELOG.md"),
    "mixed:scrape": ("table.csv",),
    "mixed:logs": ("{path}/app.log", "src/app/cli.py"),
}
# What a file holds when read, by its kind.
FILE_CONTENTS: dict[str, str] = {
    "code": "import re\n\ndef parse(text):\n    lines = text.splitlines()\n    head = lines[0]\n"
    "    return [l.strip() for l in lines[1:]]",
    "csv": "id,user_id,{col},{by},created_at\n1,1042,12.5,A,2025-07-01\n2,1077,8.0,B,2025-07-01",
    "markdown": "# {project}\n\nTODO: describe install and usage.",
    "toml": '[project]\nname = "app"\nversion = "1.3.2"\nrequires-python = ">=3.10"',
    "log": "2026-01-05T10:01:12Z ERROR request failed: connection reset by peer\n"
    "2026-01-05T10:01:13Z WARN retrying in 2s",
    "config": "worker_processes auto;\nerror_log /var/log/{service}/error.log warn;",
}
# Edits: (path, old text, new text).
PATCHES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "software": (
        ("{module}", "head = lines[0]", "head = lines[0] if lines else ''"),
        ("{module}", "except Exception:", "except (KeyError, ValueError):"),
    ),
    "file": (
        ("pyproject.toml", 'version = "1.3.2"', 'version = "{ver}"'),
        ("CHANGELOG.md", "## Unreleased", "## {ver}"),
    ),
    "mixed:upgrade": (
        ("requirements.txt", "{lib}==1.9.0", "{lib}==2.0.0"),
        ("src/app/models.py", "class Config:", "model_config = ConfigDict("),
    ),
    "mixed:logs": (("src/app/cli.py", "timeout=5", "timeout=30"),),
}
# Files written: (path, content).
WRITES: dict[str, tuple[tuple[str, str], ...]] = {
    "analysis": (
        ("analysis.py", "import pandas as pd\n\ndf = pd.read_csv('{data}')\nprint(df.describe())\n"),
        ("report.md", "# {col} by {by}\n\nFigures from {data}; the table is below.\n"),
    ),
    "software": (
        (
            "tests/test_edge_cases.py",
            "from app.parser import parse\n\n\ndef test_empty_input():\n    assert parse('') == []\n",
        ),
    ),
    "file": (
        ("TODO.md", "# TODO\n\n- {path}/index.md:12 split this section\n"),
        ("README.md", "# {project}\n\n## Install\n\n    pip install -e .\n"),
    ),
    "research": (("notes/{topic}.md", "# {topic}\n\n- three sources, summarised below\n"),),
    "mixed:tests": (("report.md", "# Test failures in {repo}\n\n- 3 failing tests, details below\n"),),
    "mixed:scrape": (("table.csv", "plan,price,seats\nStarter,0,1\nTeam,12,10\n"),),
}
# Searches: (pattern, where).
SEARCHES: dict[str, tuple[tuple[str, str], ...]] = {
    "software": (("def parse", "src"), ("{test}", "tests"), ("raise ValueError", "src")),
    "file": (("TODO", "{path}"), ("version", ".")),
    "terminal": (("error", "/var/log/{service}"), ("Listen", "/etc/{service}")),
    "mixed:tests": (("def test_", "repo/tests"), ("FAILED", "repo")),
    "mixed:upgrade": (("import {lib}", "src"), ("{lib}", "requirements.txt")),
    "mixed:logs": (("ERROR", "{path}"), ("timeout", "src/app")),
}
# Web searches, per kind of task ("default" for the others).
QUERIES: dict[str, tuple[str, ...]] = {
    "default": ("{a} vs {b} 2026", "{topic} survey", "how to {task}"),
    "mixed:tests": ("{repo} failing tests issue",),
    "mixed:upgrade": ("{lib} changelog breaking changes", "{lib} 2.0 migration guide"),
    "mixed:logs": (
        '"retry budget exhausted" connection reset by peer',
        "connection reset by peer retry timeout",
    ),
}
# Pages fetched by a kind of task that names its own (the others take ``SITES``).
PAGES: dict[str, tuple[str, ...]] = {
    "mixed:upgrade": ("https://docs.example.dev/{lib}/changelog", "https://docs.example.dev/{lib}/migration"),
    "mixed:scrape": ("{url}",),
}
SITES = (
    "https://docs.python.org/3/library/sqlite3.html",
    "https://www.postgresql.org/docs/current/",
    "https://arxiv.org/abs/2405.01234",
    "https://github.com/pallets/click/releases",
    "https://news.ycombinator.com/item?id=41234567",
    "https://developer.mozilla.org/en-US/docs/Web/API",
)

# execute_code: (code, output) pairs. ``{data}``, ``{logs}``, ``{col}`` and ``{by}`` are the
# session's own values (the ones its first message names); ``{n}``/``{x}``/``{y}``/``{z}`` are
# random numbers drawn per call.
CODE_OK = (
    (
        "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df.shape)\nprint(df.dtypes)",
        "({n}, 7)\nid              int64\nuser_id         int64\n{col}          float64\n{by}            object\n"
        "created_at      object\nstatus          object\nsource          object\ndtype: object",
    ),
    (
        "import pandas as pd\ndf = pd.read_csv('{data}', parse_dates=['created_at'])\n"
        "monthly = df.set_index('created_at').resample('MS')['user_id'].nunique()\n"
        "churn = 1 - monthly.shift(-1) / monthly\nprint(churn.round(3).tail(6))",
        "created_at\n2025-07-01    0.0{x}\n2025-08-01    0.0{y}\n2025-09-01    0.0{z}\n2025-10-01    0.0{x}\n"
        "2025-11-01    0.0{y}\n2025-12-01      NaN\nName: user_id, dtype: float64",
    ),
    (
        "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df.groupby('{by}')['{col}'].agg(['mean', 'median', 'count']).round(2))",
        "               mean  median  count\n{by}\nA            {x}.41   {y}.00    {n}\nB            {y}.07   {z}.50    {x}\n"
        "C            {z}.93   {x}.25    {y}",
    ),
    (
        "import glob, json\nimport numpy as np\nvals = [json.loads(l)['{col}'] for f in glob.glob('{logs}') for l in open(f)]\n"
        "print(len(vals), np.percentile(vals, [50, 95, 99]).round(1))",
        "{n} [ {x}.4  {y}{z}.0  {z}{y}{x}.7]",
    ),
    (
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
        "df = pd.read_csv('{data}')\ndf['{col}'].hist(bins=40)\nplt.savefig('{col}_hist.png', dpi=120)\nprint('saved')",
        "saved",
    ),
    (
        "import numpy as np\nrng = np.random.default_rng(0)\nrolls = rng.integers(1, 7, size=(10_000, 2)).sum(axis=1)\n"
        "print(np.bincount(rolls)[2:])",
        "[ 2{x}{y}  5{z}{x}  8{y}{z} 11{x}{x} 13{y}{z} 16{z}{x} 13{x}{y} 11{z}{z}  8{y}{x}  5{x}{z}  2{z}{y}]",
    ),
    (
        "import numpy as np\nfrom numpy.linalg import lstsq\nimport pandas as pd\ndf = pd.read_csv('{data}')\n"
        "X = np.c_[np.ones(len(df)), pd.get_dummies(df['{by}'], drop_first=True, dtype=float)]\n"
        "coef, *_ = lstsq(X, df['{col}'], rcond=None)\nprint(coef.round(3))",
        "[{x}.{y}{z}{x}  -{y}.{z}{x}{y}   {z}.{x}{y}{z}]",
    ),
    (
        "import numpy as np\nA = np.array([[3, 2], [1, -1]])\nb = np.array([12, 1])\nprint(np.linalg.solve(A, b))",
        "[2.8 1.8]",
    ),
    (
        "import numpy as np\npts = np.random.default_rng(1).random((1_000_000, 2))\n"
        "print(4 * (np.hypot(pts[:, 0], pts[:, 1]) <= 1).mean())",
        "3.14{x}{y}{z}",
    ),
    (
        "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df['{col}'].isna().sum())\n"
        "print(df.dropna(subset=['{col}'])['{col}'].describe().round(2))",
        "{x}{y}\ncount    {n}.00\nmean       {y}{z}.{x}1\nstd        {z}.{y}8\nmin         0.00\n"
        "50%        {y}{x}.00\nmax       {z}{x}{y}.00\nName: {col}, dtype: float64",
    ),
)
# Which snippets an analysis task asks for: a word of its opening -> a word of the snippet.
CODE_HINTS: dict[str, str] = {
    "churn": "churn",
    "percentiles": "percentile",
    "linear model": "lstsq",
    "average": "mean",
    "dice": "rolls",
    "missing": "isna",
    "pi ": "hypot",
    "equations": "solve",
    "histogram": "hist",
    "exploratory": "dtypes",
    "top 10": "nlargest",
}
# execute_code calls that fail, with what Python printed.
CODE_FAIL = (
    (
        "print(df.groupby('{by}')['{col}'].sum().nlargest(10))",
        'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
        "NameError: name 'df' is not defined",
    ),
    (
        "import polars as pl\ndf = pl.read_csv('{data}')\nprint(df.describe())",
        'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
        "ModuleNotFoundError: No module named 'polars'",
    ),
    (
        "from scipy import stats\nimport pandas as pd\nprint(stats.shapiro(pd.read_csv('{data}')['{col}']))",
        'Traceback (most recent call last):\n  File "<stdin>", line 1, in <module>\n'
        "ModuleNotFoundError: No module named 'scipy'",
    ),
    (
        "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df['{col}_usd'].mean())",
        'Traceback (most recent call last):\n  File "<stdin>", line 3, in <module>\n'
        '  File "pandas/core/frame.py", line 4102, in __getitem__\n    indexer = self.columns.get_loc(key)\n'
        "KeyError: '{col}_usd'",
    ),
    (
        "import pandas as pd\ndf = pd.read_csv('data/{col}.csv')\nprint(len(df))",
        'Traceback (most recent call last):\n  File "<stdin>", line 2, in <module>\n'
        "FileNotFoundError: [Errno 2] No such file or directory: 'data/{col}.csv'",
    ),
    (
        "import pandas as pd\ndf = pd.read_csv('{data}')\nprint(df['{col}'].astype(float).mean())",
        'Traceback (most recent call last):\n  File "<stdin>", line 3, in <module>\n'
        "ValueError: could not convert string to float: 'n/a'",
    ),
    (
        "totals = {{}}\nrate = sum(totals.values()) / len(totals)\nprint(rate)",
        'Traceback (most recent call last):\n  File "<stdin>", line 2, in <module>\n'
        "ZeroDivisionError: division by zero",
    ),
)

# execute_code outside data analysis: quick checks of the work at hand, (code, output) as above.
CHECKS_OK: dict[str, tuple[tuple[str, str], ...]] = {
    "software": (
        ("from app.parser import parse\nprint(parse(''), parse('a\\nb'))", "[] ['b']"),
        ("import sys\nprint(sys.version.split()[0])", "3.11.{x}"),
    ),
    "mixed:tests": (("import sys\nprint(sys.version.split()[0])", "3.11.{x}"),),
    "mixed:upgrade": (("import {lib}\nprint({lib}.__version__)", "2.0.{x}"),),
    "mixed:scrape": (
        (
            "import pandas as pd\ntable = pd.read_html('{url}')[0]\ntable.to_csv('table.csv', index=False)\n"
            "print(table.shape)",
            "({n}, {x})",
        ),
    ),
}
CHECKS_FAIL: dict[str, tuple[tuple[str, str], ...]] = {
    "software": (
        (
            "from app.parser import parse\nprint(parse(None))",
            'Traceback (most recent call last):\n  File "<stdin>", line 2, in <module>\n'
            "AttributeError: 'NoneType' object has no attribute 'splitlines'",
        ),
    ),
    "mixed:scrape": (
        (
            "import pandas as pd\nprint(pd.read_html('{url}')[0].shape)",
            'Traceback (most recent call last):\n  File "<stdin>", line 2, in <module>\n'
            "ImportError: lxml not found, please install it",
        ),
    ),
}
