"""The real Hermes Agent the plugin is tested against, in its own virtual environment under build/.

``make hermes-env`` (a prerequisite of ``make test``) creates ``build/hermes-<version>/`` from
``tests/hermes/requirements.lock`` and installs this checkout of kindling into it, so Hermes finds the
plugin through its entry point. A test that needs Hermes calls :func:`hermes_venv`, which FAILS the
test, never skips it, when that environment is missing or broken.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

HERMES_VERSION = "0.19.0"
ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "build" / f"hermes-{HERMES_VERSION}"


def hermes_venv() -> Path:
    """Return the Hermes virtual environment's directory; fail the test with the reason when unusable."""
    problem = _venv_problem(str(VENV))
    if problem:
        pytest.fail(problem)
    return VENV


@functools.cache
def _venv_problem(venv: str) -> str | None:
    """Why the environment at ``venv`` cannot be used (checked once per test run), or None."""
    python = Path(venv) / "bin" / "python"
    if not (Path(venv) / ".installed").is_file() or not python.is_file():
        return (
            f"The Hermes Agent {HERMES_VERSION} test environment is missing at {venv}: "
            "run `make hermes-env` (`make test` does it first)."
        )
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('hermes-agent'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0 or probe.stdout.strip() != HERMES_VERSION:
        return (
            f"{venv} does not hold hermes-agent {HERMES_VERSION} "
            f"({probe.stdout.strip() or probe.stderr.strip()[-300:]}): run `make hermes-env` again."
        )
    return None


def hermes_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a Hermes process: its home, no proxies, nothing from the developer's shell."""
    keep = {k: v for k, v in os.environ.items() if k in {"PATH", "LANG", "LC_ALL", "TMPDIR", "HOME", "USER"}}
    return {**keep, "HERMES_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1", **extra}


def run_in_hermes(script: str, home: Path, *, timeout: float = 120, **env: str) -> Any:
    """Run Python ``script`` with Hermes's interpreter; it prints one JSON value last, returned here."""
    venv = hermes_venv()
    home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=hermes_env(home, **env),
        cwd=str(home),
    )
    assert done.returncode == 0, f"Hermes script failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])
