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
    "mixed": ("the report is in report.md with links to each failure.", "the CSV is saved and validated."),
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
