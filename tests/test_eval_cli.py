"""``kindling eval`` on the command line: the dry run, a run with its table, JSON and plot, bad options,
and a run killed with SIGKILL that resumes where it stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eval_support import write_sessions
from fake_models import CopiesExamples, ModelServer
from kindling.cli.main import app

runner = CliRunner()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sessions(tmp_path_factory.mktemp("sessions") / "travel.jsonl")


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer(CopiesExamples()) as running:
        yield running


def _args(source: Path, server: ModelServer, results: Path, *extra: str) -> list[str]:
    return [
        "eval",
        str(source),
        "--base-url",
        server.base_url,
        "--model",
        "fake-model",
        "--min-messages",
        "1",
        "--results",
        str(results),
        *extra,
    ]


def test_help_names_the_options_the_issue_asks_for() -> None:
    result = runner.invoke(app, ["eval", "--help"])
    assert result.exit_code == 0
    for option in (
        "--base-url",
        "--model",
        "--api-key-env",
        "--format",
        "--concurrency",
        "--max-requests",
        "--dry-run",
        "--price-per-mtok",
        "--plot",
        "--json",
    ):
        assert option in result.output, option


def test_dry_run_prints_the_figures_and_sends_nothing(
    source: Path, server: ModelServer, tmp_path: Path
) -> None:
    before = len(server.requests)
    result = runner.invoke(
        app, [*_args(source, server, tmp_path / "r.jsonl", "--dry-run", "--price-per-mtok", "1.5")]
    )
    assert result.exit_code == 0, result.output
    assert "Dry run: nothing was sent" in result.output and "requests to send" in result.output
    as_json = runner.invoke(
        app, [*_args(source, server, tmp_path / "r.jsonl", "--dry-run", "--json", "--max-requests", "9")]
    )
    figures = json.loads(as_json.stdout)["dry_run"]
    assert figures["to_send"] == 9 and figures["requests"] == 2 * figures["cases"]
    assert len(server.requests) == before and not (tmp_path / "r.jsonl").exists()


def test_a_run_prints_the_table_the_json_and_the_plot(
    source: Path, server: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    results = tmp_path / "r.jsonl"
    table = runner.invoke(
        app, [*_args(source, server, results, "--api-key-env", "FAKE_KEY", "--sessions", "20")]
    )
    assert table.exit_code == 0, table.output
    for text in ("Cold against warm", "right tool, or failure avoided", "Per tool", "Warm is better"):
        assert text in table.output, text
    plot = tmp_path / "eval.png"
    sent = len(server.requests)
    data = runner.invoke(
        app, [*_args(source, server, results, "--sessions", "20", "--json", "--plot", str(plot))]
    )
    assert data.exit_code == 0, data.output
    report = json.loads(data.stdout)
    assert len(server.requests) == sent  # the second run read every answer from the results file
    assert report["requests"]["sent_this_run"] == 0 and report["sessions"]["held_out_sessions"] == 20
    assert report["verdict"]["outcome"] == "better" and report["plot"] == str(plot)
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_bad_options_fail_in_one_line_before_reading(tmp_path: Path) -> None:
    base = ["eval", str(tmp_path / "missing.jsonl"), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    for extra, message in (
        (["--plot", str(tmp_path / "x.gif")], "must end in"),
        (["--format", "soap"], "Unknown API format"),
        (["--folds", "1"], "--folds must be 2 or more"),
        ([], "missing.jsonl"),
    ):
        result = runner.invoke(app, [*base, *extra])
        assert result.exit_code != 0
        assert message in result.output, (extra, result.output)


def test_a_run_killed_with_sigkill_resumes_where_it_stopped(source: Path, tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    with ModelServer(CopiesExamples()) as server:
        server.latency = 0.05
        command = [
            sys.executable,
            "-m",
            "kindling",
            *_args(source, server, results, "--concurrency", "1", "--json"),
        ]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while not results.exists() or len(results.read_bytes().splitlines()) < 12:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "the run did not get going"
                time.sleep(0.02)
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
        finally:
            if process.poll() is None:
                process.kill()
            if process.stderr is not None:
                process.stderr.close()
        assert process.returncode == -signal.SIGKILL
        kept = len(results.read_bytes().splitlines())
        asked_before = len(server.requests)
        server.latency = 0.0
        resumed = runner.invoke(app, [*_args(source, server, results, "--json")])
        assert resumed.exit_code == 0, resumed.output
        report = json.loads(resumed.stdout)
        unique = 2 * report["cases"]["planned"]
        assert kept < unique
        # Only what the results file lacked was asked again (plus the one in flight at the kill, if any).
        assert report["requests"]["sent_this_run"] == unique - kept
        assert asked_before + report["requests"]["sent_this_run"] <= unique + 1
        assert report["cases"]["scored"] == report["cases"]["planned"]
        fresh = runner.invoke(app, [*_args(source, server, tmp_path / "fresh.jsonl", "--json")])
    assert json.loads(fresh.stdout)["metrics"] == report["metrics"]
