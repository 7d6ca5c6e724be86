"""Task types: the 60% dominance threshold over tool families, globs, config, and free text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kindling.mining import (
    TaskType,
    classify_calls,
    classify_task_text,
    measure_text_accuracy,
    mining_config_path,
)
from kindling.mining.tasktype import TaskClassifier
from kindling.sessions import generate_sample_db, iter_sessions
from kindling.sessions.model import Message, Session, ToolCall


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["execute_code"] * 4, TaskType.CODE),
        (["read_file", "write_file", "patch", "search_files"], TaskType.FILE),
        (["web_search", "browser_navigate", "browser_click", "web_extract"], TaskType.RESEARCH),
        (["terminal", "shell", "execute_terminal"], TaskType.TERMINAL),
        # 3 of 5 is exactly 60%: not more than 60%, so mixed.
        (["terminal"] * 3 + ["read_file"] * 2, TaskType.MIXED),
        # 4 of 6 is 66.7%: terminal wins.
        (["terminal"] * 4 + ["read_file"] * 2, TaskType.TERMINAL),
        # 61 of 100 is just over the threshold.
        (["web_search"] * 61 + ["execute_code"] * 39, TaskType.RESEARCH),
        (["web_search"] * 60 + ["execute_code"] * 40, TaskType.MIXED),
        # Tools in no family (memory, clarify, todo) do not dilute the share.
        (["execute_code"] * 2 + ["memory", "clarify", "todo", "todo"], TaskType.CODE),
        (["memory", "todo"], TaskType.MIXED),
        ([], TaskType.MIXED),
    ],
)
def test_classify_calls(names: list[str], expected: TaskType) -> None:
    assert classify_calls(names) is expected


def test_task_type_is_a_str_enum() -> None:
    assert TaskType("code") is TaskType.CODE
    assert TaskType.MIXED == "mixed"
    assert [t.value for t in TaskType] == ["code", "file", "research", "terminal", "mixed"]


def test_families_can_be_replaced_or_extended() -> None:
    assert classify_calls(["my_notebook"] * 3, families={"code": ["my_*"]}) is TaskType.CODE
    assert classify_calls(["arxiv_search"] * 3) is TaskType.MIXED
    path = mining_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"tool_families": {"research": ["arxiv_*"]}}))
    assert classify_calls(["arxiv_search"] * 3) is TaskType.RESEARCH


def test_family_of_prefers_exact_names_and_caches() -> None:
    classifier = TaskClassifier({"research": ["browser_*"], "file": ["browser_download"]})
    assert classifier.family_of("browser_download") == "file"
    assert classifier.family_of("browser_click") == "research"
    assert classifier.family_of("unknown") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Write a Python script that computes the moving average of this CSV with pandas", TaskType.CODE),
        (
            "Search the web for the latest news on the Rust 2024 edition and summarize the articles",
            TaskType.RESEARCH,
        ),
        (
            "Install docker on the server and restart the nginx service, then check the logs",
            TaskType.TERMINAL,
        ),
        ("Edit config.yaml and replace the line with the old port; save the file", TaskType.FILE),
        ("hello there", TaskType.MIXED),
        ("", TaskType.MIXED),
    ],
)
def test_classify_task_text(text: str, expected: TaskType) -> None:
    assert classify_task_text(text) is expected


def test_text_keywords_match_word_starts_only() -> None:
    keywords = {"terminal": ["git"], "code": ["python"]}
    assert classify_task_text("run git status", keywords=keywords) is TaskType.TERMINAL
    # "digit" contains "git" but not at a word start.
    assert classify_task_text("sum every digit", keywords=keywords) is TaskType.MIXED
    # One hit each: no family holds more than half of the hits.
    assert classify_task_text("python and git", keywords=keywords) is TaskType.MIXED


def test_text_keywords_from_config() -> None:
    path = mining_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"task_keywords": {"research": ["zeitgeist"]}}))
    assert classify_task_text("zeitgeist zeitgeist") is TaskType.RESEARCH


def test_text_accuracy_on_the_sample_data(tmp_path: Path) -> None:
    """The documented accuracy (about 80%) holds on a fresh sample; far above always guessing one type."""
    path = generate_sample_db(tmp_path / "state.db", sessions=300, seed=5)
    result = measure_text_accuracy(iter_sessions(path))
    assert result.total > 250
    assert result.accuracy is not None and result.accuracy >= 0.72
    most_common_truth = max(
        sum(n for (truth, _), n in result.confusion.items() if truth == t.value) for t in TaskType
    )
    assert result.correct > most_common_truth * 1.5
    assert sum(result.confusion.values()) == result.total


def test_text_accuracy_counts_only_sessions_with_calls_and_text() -> None:
    sessions = [
        Session(id="a", source="x", messages=(Message(role="user", content="install htop"),)),
        Session(
            id="b",
            source="x",
            messages=(
                Message(role="user", content="install htop and restart the service"),
                Message(role="assistant", tool_calls=(ToolCall(id="1", name="terminal"),)),
            ),
        ),
        Session(
            id="c",
            source="x",
            messages=(
                Message(role="user", content="search the web for the latest news"),
                Message(role="assistant", tool_calls=(ToolCall(id="1", name="terminal"),)),
            ),
        ),
    ]
    result = measure_text_accuracy(sessions)
    assert (result.total, result.correct, result.accuracy) == (2, 1, 0.5)
    assert result.confusion[("terminal", "research")] == 1
