"""Mixed work: each task needs several kinds of tools (``mixed``)."""

from __future__ import annotations

from kindling.sessions.sample_data import (
    PYTEST_OK,
    Request,
    Task,
    browse,
    edit,
    extract,
    grep,
    py,
    python_traceback,
    read,
    search,
    sh,
    write,
)

TASKS: tuple[Task, ...] = (
    Task(
        Request(
            "Clone {repo}, run its tests and write a summary of the failures to report.md.",
            (
                sh(
                    "git clone --depth 1 https://{repo} repo",
                    "Cloning into 'repo'...",
                    (128, "fatal: destination path 'repo' already exists and is not an empty directory."),
                ),
                sh(
                    "cd repo && pip install -q -e '.[test]'",
                    "",
                    (1, "ERROR: file:///repo does not appear to be a Python project"),
                ),
                sh(
                    "cd repo && pytest -q -rf | tail -n 3",
                    "FAILED {failing_file}::{failing_test}\n3 failed, 120 passed in 8.41s",
                    weight=2,
                ),
                read(
                    "repo/{failing_file}",
                    "def {failing_test}(monkeypatch):\n    monkeypatch.setenv('HTTPS_PROXY', 'http://proxy:3128')\n",
                    weight=2,
                ),
                grep(
                    "def {failing_test}",
                    "repo/tests",
                    ("repo/{failing_file}:88:def {failing_test}(monkeypatch):",),
                ),
                search(
                    "{repo_name} {failing_test} failing",
                    (
                        (
                            "{failing_test} fails when a proxy is set",
                            "https://{repo}/issues",
                            "An open issue.",
                        ),
                    ),
                ),
                write(
                    "report.md",
                    "# Test failures in {repo}\n\n- {failing_file}::{failing_test}: fails with a proxy set in the environment\n",
                    weight=2,
                ),
            ),
            "report.md lists the three failures and why each fails.",
        ),
        (
            Request(
                "Check whether upstream already knows about these failures.",
                (
                    search(
                        "{repo_name} {failing_test} failing",
                        (
                            (
                                "{failing_test} fails when a proxy is set",
                                "https://{repo}/issues",
                                "An open issue.",
                            ),
                        ),
                        weight=2,
                    ),
                    browse("https://{repo}/issues", "Issues · {repo}"),
                ),
                "Upstream knows: there is an open issue, linked above.",
            ),
            Request(
                "Re-run only the failing tests.",
                (
                    sh(
                        "cd repo && pytest -q {failing_file}::{failing_test}",
                        "F\n1 failed in 0.62s",
                        weight=2,
                    ),
                ),
                "Still failing, for the same reason.",
            ),
        ),
        ("repo",),
    ),
    Task(
        Request(
            "Look up the {lib} changelog, then upgrade it in our project and fix what breaks.",
            (
                search(
                    "{lib} {lib_new} changelog breaking changes",
                    (
                        (
                            "{lib} {lib_new} release notes",
                            "https://docs.example.dev/{lib}/changelog",
                            "What changed, and how to migrate.",
                        ),
                    ),
                ),
                extract(
                    ("https://docs.example.dev/{lib}/changelog",),
                    "## {lib_new}\n\nBreaking: `{broke}` is gone; use `{fixed}`.",
                ),
                sh("pip show {lib} | head -n 2", "Name: {lib}\nVersion: {lib_old}"),
                edit("requirements.txt", "{lib}=={lib_old}", "{lib}=={lib_new}", weight=2),
                sh("pip install -r requirements.txt", "Successfully installed {lib}-{lib_new}"),
                sh(
                    "pytest -x -q tests/",
                    PYTEST_OK,
                    (1, "E   {lib_error}\n1 failed, 23 passed in 1.84s"),
                    weight=2,
                ),
                grep("{broke_key}", "src", ("src/app/models.py:3:{broke}",)),
                edit("src/app/models.py", "{broke}", "{fixed}", weight=2),
            ),
            "{lib} is at {lib_new}; the one breaking change is fixed and the tests pass.",
        ),
        (
            Request(
                "Run the tests again.",
                (
                    sh(
                        "pytest -x -q tests/",
                        PYTEST_OK,
                        (1, "E   {lib_error}\n1 failed, 23 passed in 1.84s"),
                    ),
                ),
                "They pass.",
            ),
            Request(
                "Pin it in pyproject.toml too.",
                (
                    read("pyproject.toml", '[project]\nname = "app"\ndependencies = ["{lib}=={lib_old}"]\n'),
                    edit("pyproject.toml", '"{lib}=={lib_old}"', '"{lib}=={lib_new}"', weight=2),
                ),
                "pyproject.toml pins {lib}=={lib_new} too.",
            ),
        ),
        ("lib",),
    ),
    Task(
        Request(
            "Scrape the table from {url} and save it as CSV.",
            (
                browse("{url}", "{page_title}", weight=2),
                extract(("{url}",), "# {page_title}\n\n{columns}\n{row}"),
                py(
                    "import pandas as pd\ntable = pd.read_html('{url}')[0]\ntable.to_csv('table.csv', index=False)\nprint(table.shape)",
                    "({x}, {y})",
                    python_traceback(2, "ImportError: lxml not found, please install it"),
                    weight=3,
                ),
                read("table.csv", "{columns}\n{row}\n"),
                sh(
                    "curl -s {url} | head -n 2",
                    '<!doctype html>\n<html lang="en">',
                    (6, "curl: (6) Could not resolve host: {url}"),
                ),
            ),
            "table.csv has the table, one row per line of the page.",
        ),
        (
            Request(
                "Add today's date as a column.",
                (
                    py(
                        "import pandas as pd\ndf = pd.read_csv('table.csv')\ndf['scraped_on'] = '2026-01-05'\ndf.to_csv('table.csv', index=False)\nprint(df.shape)",
                        "({x}, {y})",
                    ),
                    sh("head -n 2 table.csv", "{columns},scraped_on\n{row},2026-01-05"),
                    read("table.csv", "{columns},scraped_on\n{row},2026-01-05\n"),
                ),
                "Every row has a scraped_on column now.",
            ),
        ),
        ("page",),
    ),
    Task(
        Request(
            "Read the logs in {log_dir}, find the error, search online for it and propose a fix.",
            (
                read(
                    "{log_dir}/app.log",
                    "2026-01-05T10:01:12Z ERROR request failed: connection reset by peer\n"
                    "2026-01-05T10:01:13Z ERROR retry budget exhausted\n",
                    weight=2,
                ),
                grep(
                    "ERROR",
                    "{log_dir}",
                    (
                        "{log_dir}/app.log:1041:2026-01-05T10:01:12Z ERROR request failed: connection reset by peer",
                        "{log_dir}/app.log:1042:2026-01-05T10:01:13Z ERROR retry budget exhausted",
                    ),
                ),
                sh(
                    "grep -c ERROR {log_dir}/app.log",
                    "14",
                    (2, "grep: {log_dir}/app.log: No such file or directory"),
                ),
                search(
                    '"connection reset by peer" "retry budget exhausted"',
                    (
                        (
                            "Connection reset by peer behind a load balancer",
                            "https://docs.example.dev/http/timeouts",
                            "Idle timeouts, explained.",
                        ),
                    ),
                    weight=2,
                ),
                extract(
                    ("https://docs.example.dev/http/timeouts",),
                    "# Timeouts\n\nA client timeout shorter than the load balancer's idle timeout resets connections.",
                ),
            ),
            "The client's 5 s timeout is shorter than the load balancer's; raising it to 30 s should fix it.",
        ),
        (
            Request(
                "Go ahead and apply the fix.",
                (
                    read("src/app/client.py", "import httpx\n\nclient = httpx.Client(timeout=5)\n"),
                    edit("src/app/client.py", "timeout=5", "timeout=30", weight=2),
                    sh(
                        "pytest -x -q tests/",
                        PYTEST_OK,
                        (
                            1,
                            "F\nFAILED tests/test_client.py::test_timeout - assert 30 == 5\n1 failed, 23 passed in 1.70s",
                        ),
                    ),
                ),
                "The timeout is 30 s now; the tests pass.",
            ),
            Request(
                "Search for how others fixed it.",
                (
                    search(
                        "client timeout shorter than load balancer idle timeout fix",
                        (
                            (
                                "Match your client timeout to the load balancer",
                                "https://docs.example.dev/http/timeouts",
                                "The usual fix.",
                            ),
                        ),
                        weight=2,
                    ),
                    extract(
                        ("https://docs.example.dev/http/timeouts",),
                        "# Timeouts\n\nSet the client timeout above the load balancer's idle timeout.",
                    ),
                ),
                "Others raised the client timeout above the load balancer's, as proposed.",
            ),
        ),
    ),
)
