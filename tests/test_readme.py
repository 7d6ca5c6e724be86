"""The README's quick start and Python example work as written; the configuration page lists every variable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kindling import generate_sample_db

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "README has no Python example"
    monkeypatch.setenv("HOME", str(tmp_path))
    generate_sample_db(tmp_path / ".hermes" / "state.db", sessions=60)
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    assert namespace["template"].version == 1  # type: ignore[attr-defined]
    assert namespace["warmed"].messages  # type: ignore[attr-defined]


def test_readme_quick_start_is_exactly_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    quick = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in quick.strip().splitlines()]
    assert commands == ["make run", "make test"]


def test_the_configuration_page_lists_every_environment_variable_kindling_reads() -> None:
    """Every variable name the code spells out as a string appears in docs/configuration.md's table.

    Hermes's own variables (HERMES_* other than HERMES_HOME) are Hermes's to document, not kindling's.
    """
    source = Path(__file__).resolve().parent.parent / "src" / "kindling"
    names = set()
    for path in source.rglob("*.py"):
        names |= set(
            re.findall(r"[\"'`]((?:KINDLING_[A-Z0-9_]*[A-Z0-9])|HERMES_HOME)[\"'`]", path.read_text("utf-8"))
        )
    assert len(names) >= 30, sorted(names)  # the scan finds what the code reads
    page = README.parent / "docs" / "configuration.md"
    table = page.read_text(encoding="utf-8").split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    missing = sorted(name for name in names if f"`{name}`" not in table)
    assert not missing, f"add these to docs/configuration.md's table: {missing}"
