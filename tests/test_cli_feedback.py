"""Long work shows progress on a terminal: each command runs in a real pseudo-terminal here.

Progress goes to stderr only when stderr is a terminal, so CliRunner (a pipe) cannot see it.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

from fake_openai import FakeOpenAI, text
from kindling.sessions import generate_sample_db, iter_sessions


def run_in_terminal(
    args: list[str], timeout: float = 60, *, seen: tuple[str, threading.Event] | None = None
) -> tuple[int, str, str]:
    """Run ``kindling ARGS`` with stderr on a pseudo-terminal; return (exit code, stdout, terminal text).

    ``seen`` = ``(text, event)`` sets the event once the terminal has shown ``text``.
    """
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", "LINES": "40"}
    process = subprocess.Popen(
        [sys.executable, "-m", "kindling", *args], stdout=subprocess.PIPE, stderr=follower, env=env
    )
    os.close(follower)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closes when the process ends
                return
            if not data:
                return
            chunks.append(data)
            if seen is not None and seen[0].encode() in b"".join(chunks):
                seen[1].set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    stdout, _ = process.communicate(timeout=timeout)
    reader.join(timeout=5)
    os.close(leader)
    return process.returncode, stdout.decode(), b"".join(chunks).decode("utf-8", "replace")


def test_sample_shows_progress_with_its_total(tmp_path: Path) -> None:
    code, stdout, terminal = run_in_terminal(["sample", str(tmp_path / "s.db"), "--sessions", "300"])
    assert code == 0, terminal
    assert stdout.strip() == str(tmp_path / "s.db")
    assert "Writing sample sessions" in terminal and "/300" in terminal


def test_sample_library_reports_every_session() -> None:
    seen: list[int] = []
    path = generate_sample_db(None, sessions=25, on_progress=seen.append)
    assert sum(seen) == 25 == sum(1 for _ in iter_sessions(path))


def test_review_says_what_it_waits_for(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    db = generate_sample_db(tmp_path / "state.db", sessions=4, seed=3)
    session_id = next(iter_sessions(db)).id
    # The model answers only once the terminal has said what it waits for.
    shown = threading.Event()
    fake_openai.script = [{"fault": "wait", "until": shown}, text("Nothing worth keeping.")]
    code, stdout, terminal = run_in_terminal(
        [
            "review",
            str(db),
            "--session",
            session_id,
            "--base-url",
            fake_openai.base_url,
            "--model",
            "slow-model",
        ],
        seen=("waiting for slow-model", shown),
    )
    assert code == 0, terminal + stdout
    assert shown.is_set() and f"Reviewing session {session_id}" in terminal
    assert "waiting for slow-model" in terminal


def test_stats_and_build_progress_know_the_total_of_a_hermes_database(tmp_path: Path) -> None:
    db = generate_sample_db(tmp_path / "state.db", sessions=120, seed=5)
    for args in (["stats", str(db)], ["build", "main", str(db)]):
        code, _stdout, terminal = run_in_terminal(args)
        assert code == 0, terminal
        assert "/120" in terminal and "/?" not in terminal, (args, terminal[-500:])


def test_estimate_sessions_is_exact_for_hermes_and_unknown_otherwise(tmp_path: Path) -> None:
    from kindling.sessions.sources import estimate_sessions

    db = generate_sample_db(tmp_path / "state.db", sessions=40, seed=2)
    assert estimate_sessions([db]) == 40 == sum(1 for _ in iter_sessions(db))
    assert estimate_sessions([db, db]) == 80
    assert not any(tmp_path.glob("state.db-*"))  # the count leaves no -wal/-shm behind
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n', encoding="utf-8")
    assert estimate_sessions([db, chat]) is None
    assert estimate_sessions([tmp_path / "missing.db"]) is None
