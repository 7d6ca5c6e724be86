"""The shared file-input leaf: one epoch parser, one skip vocabulary, no import loops between readers."""

from __future__ import annotations

import ast
import gzip
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import kindling.sessions.skips as skips
from kindling.errors import SourceError
from kindling.sessions.files import epoch, open_lines, peek, read_document
from kindling.sessions.model import ReadReport

SESSIONS = Path(__file__).resolve().parents[1] / "src" / "kindling" / "sessions"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "sessions.md"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1700000000, 1700000000.0),
        (1700000000.5, 1700000000.5),
        ("1700000000.5", 1700000000.5),
        ("2023-11-14T22:13:20Z", 1700000000.0),
        ("2023-11-14T22:13:20z", 1700000000.0),
        ("2023-11-14T22:13:20+00:00", 1700000000.0),
        ("2023-11-15T00:13:20+02:00", 1700000000.0),
        ("2023-11-14T22:13:20", 1700000000.0),  # no zone: UTC, the same on every machine
        ("2023-11-14 22:13:20.250000", 1700000000.25),
        (datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc), 1700000000.0),
        (datetime(2023, 11, 14, 22, 13, 20), 1700000000.0),
        (datetime(2023, 11, 15, 1, 13, 20, tzinfo=timezone(timedelta(hours=3))), 1700000000.0),
        (None, None),
        (True, None),
        ("", None),
        ("  ", None),
        ("yesterday", None),
        ("nan", None),
        (float("inf"), None),
        ([1], None),
    ],
)
def test_epoch_reads_every_time_shape_the_same_way(value: object, expected: float | None) -> None:
    assert epoch(value) == expected


def test_no_reader_defines_its_own_epoch_or_file_helpers() -> None:
    for module in SESSIONS.glob("*.py"):
        if module.name == "files.py":
            continue
        tree = ast.parse(module.read_text())
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert not names & {"_epoch", "epoch", "peek", "open_lines", "_probe", "_read_document"}, module.name


def test_readers_do_not_import_each_other_in_a_loop() -> None:
    # sources detects and dispatches: no reader module imports it (it imports them, lazily), and
    # no reader imports another reader; the leaves (files, skips, model, convert) import no reader.
    readers = {"jsonl", "taubench", "hermes", "recorded"}
    for module in SESSIONS.glob("*.py"):
        if module.name in ("sources.py", "__init__.py"):
            continue
        text = module.read_text()
        assert "kindling.sessions.sources" not in text, module.name
        for reader in readers - {module.stem}:
            assert f"kindling.sessions.{reader} import" not in text, (module.name, reader)


def _skip_arguments() -> list[tuple[str, str]]:
    found = []
    for module in sorted(SESSIONS.glob("*.py")):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "skip"
                and node.args
            ):
                for leaf in ast.walk(node.args[0]):
                    if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
                        found.append((module.name, leaf.value))
                    elif isinstance(leaf, ast.Name) and leaf.id.isupper():
                        found.append((module.name, getattr(skips, leaf.id)))
    return found


def test_every_skip_reason_a_reader_counts_is_in_the_one_vocabulary() -> None:
    used = _skip_arguments()
    assert len(used) > 20
    unknown = [(module, reason) for module, reason in used if reason not in skips.SKIP_REASONS]
    assert unknown == []


def test_docs_list_every_skip_reason() -> None:
    documented = set(re.findall(r"^\| `([a-z0-9_]+)`", DOCS.read_text(), re.MULTILINE))
    assert set(skips.SKIP_REASONS) <= documented


def test_read_document_counts_a_cut_document_once(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_bytes(b'{"simulations": [{"id": 1, "messages": [')
    report = ReadReport()
    assert read_document(path, report) is None
    assert report.skipped == {"truncated_file": 1}
    zipped = tmp_path / "cut.json.gz"
    zipped.write_bytes(gzip.compress(b'{"a": 1}')[:-6])
    report = ReadReport()
    assert read_document(zipped, report) is None
    assert report.skipped == {"truncated_file": 1}


def test_peek_and_open_lines_see_through_gzip_and_fail_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a": 1}\n{"b": 2}\n'))
    assert peek(path).startswith(b'{"a": 1}')
    assert list(open_lines(path)) == [b'{"a": 1}\n', b'{"b": 2}\n']
    with pytest.raises(SourceError, match="Cannot open"):
        peek(tmp_path / "missing.json")
    with pytest.raises(SourceError, match="Cannot open"):
        list(open_lines(tmp_path / "missing.json"))
