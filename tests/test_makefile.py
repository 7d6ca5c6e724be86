"""The Makefile's install steps say what they do (``make run`` was silent for a minute and a half)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(*args: str) -> list[str]:
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize(("target", "lock"), [("run", "requirements.lock"), ("dev", "requirements-dev.lock")])
def test_a_fresh_install_says_what_it_is_doing(tmp_path: Path, target: str, lock: str) -> None:
    venv = tmp_path / "venv"
    goal = "run" if target == "run" else f"{venv}/.dev-installed"
    lines = _dry_run(goal, f"VENV={venv}")
    installs = [i for i, line in enumerate(lines) if " install " in line and "/pip " in line]
    assert len(installs) == 2, lines
    for index in installs:
        # pip stays quiet; the line before it tells the user what is being installed.
        assert " -q " in lines[index], lines[index]
        assert lines[index - 1].startswith("echo ") and "Installing" in lines[index - 1], lines[index - 1]
    assert lock in lines[installs[0] - 1] and "minute" in lines[installs[0] - 1]
    assert any(line.startswith("echo ") and "virtual environment" in line for line in lines[: installs[0]])
    assert any(line.startswith("echo ") and "Installed" in line for line in lines[installs[1] :])


def test_an_installed_environment_installs_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / ".run-installed").touch()  # newer than requirements.lock and pyproject.toml
    lines = _dry_run(f"{venv}/.run-installed", f"VENV={venv}")
    assert not any("Installing" in line or "pip" in line or "venv" in line.split()[0] for line in lines), (
        lines
    )
