"""Software work: fixes, features and refactors done with file tools and pytest (``file``)."""

from __future__ import annotations

from kindling.sessions.sample_data import (
    PYTEST_FAIL,
    PYTEST_OK,
    Request,
    Task,
    edit,
    grep,
    read,
    remember,
    sh,
    write,
)


def _run_suite(failure: str) -> Request:
    """The user asks for the whole suite; ``failure`` is what pytest prints when a test fails."""
    return Request(
        "Run the whole test suite to make sure nothing else broke.",
        (sh("pytest -x -q tests/", PYTEST_OK, (1, failure)),),
        "The whole suite passes.",
    )


_SHOW_FIX = Request(
    "Show me what you changed.",
    (
        sh("git diff --stat", " {module} | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)"),
        sh("git diff {module}", "-    {old}\n+    {new}"),
    ),
    "One line changed; the diff is above.",
)
_CALLERS = Request(
    "Where else is {func} called?",
    (
        grep(
            "{func}(", ".", ("{module}:4:def {func}(", "app/api.py:57:    result = {func}(payload)"), weight=2
        ),
        read(
            "app/api.py",
            "from {import} import {func}\n\n\ndef handle(payload):\n    result = {func}(payload)\n    return result\n",
        ),
    ),
    "Only app/api.py calls it, and the fix covers that call too.",
    weight=6,
)
_REMEMBER_PYTEST = Request(
    "Remember that I run the tests with pytest -x.",
    (remember("The user runs the tests with pytest -x."),),
    "Noted: pytest -x from now on.",
)
_DUPE = (
    "def create_{entity}(data):\n    if not data.get('{field}'):\n        raise ValueError('{field} is required')\n"
    "    return save(data)\n\n\ndef update_{entity}(current, data):\n    if not data.get('{field}'):\n"
    "        raise ValueError('{field} is required')\n    return save({**current, **data})\n"
)

TASKS: tuple[Task, ...] = (
    Task(
        Request(
            "Fix the failing test in {module}: {test} raises {exc}.",
            (
                sh(
                    "pytest -x -q tests/ -k {test}",
                    ".                                                         [100%]\n1 passed, 23 deselected in 0.38s",
                    (1, PYTEST_FAIL),
                ),
                read("{module}", "{source}", weight=3),
                grep("def {func}", ".", ("{module}:4:def {func}(",)),
                edit("{module}", "{old}", "{new}", weight=3),
            ),
            "Fixed: {test} passes now.",
        ),
        (
            _run_suite(PYTEST_FAIL),
            _SHOW_FIX,
            _REMEMBER_PYTEST,
            _CALLERS,
            Request(
                "Add a regression test for that case.",
                (
                    write(
                        "tests/test_{func}_regression.py",
                        "from {import} import *\n\n\ndef test_{func}_regression():\n    {regression}\n",
                    ),
                    sh(
                        "pytest -q tests/test_{func}_regression.py",
                        ".                                                         [100%]\n1 passed in 0.21s",
                        (1, "E   ModuleNotFoundError: No module named '{import}'\n1 error in 0.19s"),
                    ),
                ),
                "The regression test is in tests/test_{func}_regression.py and passes.",
                weight=3,
            ),
        ),
        ("bug",),
    ),
    Task(
        Request(
            "Add a --{flag} option to our CLI in app/cli.py and cover it with tests.",
            (
                read(
                    "app/cli.py",
                    "import argparse\n\n\ndef build_parser():\n    parser = argparse.ArgumentParser(prog='app')\n"
                    "    parser.add_argument('path')\n    return parser\n",
                    weight=2,
                ),
                grep("add_argument", "app", ("app/cli.py:6:    parser.add_argument('path')",)),
                edit(
                    "app/cli.py",
                    "    parser.add_argument('path')\n",
                    "    parser.add_argument('path')\n    parser.add_argument('--{flag}', help='{flag_help}')\n",
                    weight=3,
                ),
                write(
                    "tests/test_cli_{flag_id}.py",
                    "from app.cli import build_parser\n\n\ndef test_{flag_id}_is_parsed():\n"
                    "    args = build_parser().parse_args(['x', '--{flag}', 'y'])\n    assert args.{flag_id} == 'y'\n",
                    weight=2,
                ),
                sh(
                    "pytest -q tests/test_cli_{flag_id}.py",
                    ".                                                         [100%]\n1 passed in 0.24s",
                    (2, "ERROR: file or directory not found: tests/test_cli_{flag_id}.py"),
                ),
            ),
            "--{flag} is added and tested.",
        ),
        (
            _run_suite(
                "F\nFAILED tests/test_cli.py::test_help_lists_every_option - AssertionError\n1 failed, 23 passed in 1.77s"
            ),
            Request(
                "Mention the new option in the README.",
                (
                    read("README.md", "# app\n\n## Usage\n\n    app PATH\n"),
                    edit(
                        "README.md",
                        "    app PATH\n",
                        "    app PATH [--{flag} VALUE]\n\n--{flag}: {flag_help}\n",
                        weight=2,
                    ),
                ),
                "The README's usage section shows --{flag}.",
                weight=6,
            ),
        ),
        ("flag",),
    ),
    Task(
        Request(
            "Refactor {dupe_module} so the validation logic is not duplicated.",
            (
                read("{dupe_module}", _DUPE, weight=3),
                grep(
                    "raise ValueError",
                    "{dupe_module}",
                    (
                        "{dupe_module}:3:        raise ValueError('{field} is required')",
                        "{dupe_module}:9:        raise ValueError('{field} is required')",
                    ),
                    weight=2,
                ),
                edit(
                    "{dupe_module}",
                    "    if not data.get('{field}'):\n        raise ValueError('{field} is required')\n",
                    "    _require_{field}(data)\n",
                    weight=3,
                ),
                sh(
                    "pytest -x -q tests/",
                    PYTEST_OK,
                    (
                        1,
                        "F\nFAILED tests/test_{entity}s.py::test_update_{entity} - NameError: name '_require_{field}' is not defined\n1 failed, 23 passed in 1.64s",
                    ),
                ),
            ),
            "Both functions call one _require_{field}() helper now; the tests pass.",
        ),
        (
            _run_suite(
                "F\nFAILED tests/test_{entity}s.py::test_update_{entity} - NameError: name '_require_{field}' is not defined\n1 failed, 23 passed in 1.64s"
            ),
            Request(
                "Show me what you changed.",
                (
                    sh(
                        "git diff --stat",
                        " {dupe_module} | 14 ++++++++------\n 1 file changed, 8 insertions(+), 6 deletions(-)",
                    ),
                ),
                "The duplicated check became one helper; the diff stat is above.",
            ),
            Request(
                "Where else is this check written out?",
                (
                    grep(
                        "raise ValueError('{field} is required')",
                        "app",
                        ("{dupe_module}:3:        raise ValueError('{field} is required')",),
                        weight=2,
                    ),
                    read(
                        "{dupe_module}",
                        "def _require_{field}(data):\n    if not data.get('{field}'):\n        raise ValueError('{field} is required')\n",
                    ),
                ),
                "Nowhere else: the helper is the only place the check is written now.",
                weight=6,
            ),
        ),
        ("dupe",),
    ),
    Task(
        Request(
            "Write a Python function that parses {fmt} files into dataclasses, with unit tests.",
            (
                write(
                    "app/readers/{reader}.py",
                    '"""Read {fmt} files into dataclasses."""\n\n'
                    "from dataclasses import dataclass\nimport {lib}\n\n\n@dataclass\nclass Entry:\n    name: str\n\n\n"
                    "def parse(text: str) -> list[Entry]:\n    ...\n",
                    weight=3,
                ),
                write(
                    "tests/test_{reader}.py",
                    "from app.readers.{reader} import parse\n\n\ndef test_parses_one_entry():\n"
                    "    assert parse('''{sample}''') != []\n",
                    weight=2,
                ),
                sh(
                    "pytest -q tests/test_{reader}.py",
                    "...                                                       [100%]\n3 passed in 0.31s",
                    (1, "F..\n1 failed, 2 passed in 0.33s"),
                    weight=2,
                ),
                read("app/readers/{reader}.py", "from dataclasses import dataclass\nimport {lib}\n"),
            ),
            "parse() is in app/readers/{reader}.py with three tests.",
        ),
        (
            _run_suite(
                "F\nFAILED tests/test_{reader}.py::test_parses_one_entry - AssertionError\n1 failed, 23 passed in 1.69s"
            ),
            Request(
                "Handle an empty file too.",
                (
                    read("app/readers/{reader}.py", "def parse(text: str) -> list[Entry]:\n    ...\n"),
                    edit(
                        "app/readers/{reader}.py",
                        "def parse(text: str) -> list[Entry]:\n",
                        "def parse(text: str) -> list[Entry]:\n    if not text.strip():\n        return []\n",
                        weight=2,
                    ),
                    sh(
                        "pytest -q tests/test_{reader}.py",
                        "....                                                      [100%]\n4 passed in 0.32s",
                    ),
                ),
                "An empty file gives an empty list now.",
                weight=6,
            ),
        ),
        ("fmt",),
    ),
    Task(
        Request(
            "Why does {module} throw {exc}? Please debug and fix it.",
            (
                sh("python - <<'EOF'\n{repro}\nEOF", "{repro_out}", weight=2),
                read("{module}", "{source}", weight=3),
                edit("{module}", "{old}", "{new}", weight=3),
                sh(
                    "pytest -x -q tests/ -k {func}",
                    ".                                                         [100%]\n2 passed, 22 deselected in 0.41s",
                    (1, PYTEST_FAIL),
                ),
            ),
            "It was `{old}`; it is `{new}` now and the case works.",
        ),
        (_run_suite(PYTEST_FAIL), _SHOW_FIX, _REMEMBER_PYTEST, _CALLERS),
        ("bug",),
    ),
    Task(
        Request(
            "Implement retry with exponential backoff in app/http_client.py.",
            (
                read(
                    "app/http_client.py",
                    "import httpx\n\n\ndef fetch(url):\n    return httpx.get(url, timeout=10)\n",
                    weight=2,
                ),
                grep("httpx.get", "app", ("app/http_client.py:5:    return httpx.get(url, timeout=10)",)),
                edit(
                    "app/http_client.py",
                    "    return httpx.get(url, timeout=10)\n",
                    "    for attempt in range(5):\n        try:\n            return httpx.get(url, timeout=10)\n"
                    "        except httpx.TransportError:\n            time.sleep(2 ** attempt)\n    return httpx.get(url, timeout=10)\n",
                    weight=3,
                ),
                write(
                    "tests/test_http_client.py",
                    "from app.http_client import fetch\n\n\ndef test_retries(monkeypatch):\n    ...\n",
                ),
                sh(
                    "pytest -q tests/test_http_client.py",
                    "..                                                        [100%]\n2 passed in 0.52s",
                    (1, "E   NameError: name 'time' is not defined\n1 failed, 1 passed in 0.50s"),
                ),
            ),
            "fetch() retries five times, doubling the wait each time.",
        ),
        (
            _run_suite(
                "F\nFAILED tests/test_http_client.py::test_retries - NameError: name 'time' is not defined\n1 failed, 23 passed in 1.90s"
            ),
            Request(
                "Cap the delay at 30 seconds.",
                (
                    read(
                        "app/http_client.py",
                        "import time\n\nimport httpx\n\n\ndef fetch(url):\n    for attempt in range(5):\n",
                    ),
                    edit(
                        "app/http_client.py",
                        "time.sleep(2 ** attempt)",
                        "time.sleep(min(2 ** attempt, 30))",
                        weight=2,
                    ),
                    sh(
                        "pytest -q tests/test_http_client.py",
                        "..                                                        [100%]\n2 passed in 0.52s",
                    ),
                ),
                "No wait is longer than 30 seconds now.",
                weight=6,
            ),
        ),
    ),
)
