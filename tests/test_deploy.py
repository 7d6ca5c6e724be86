"""deploy/: the systemd units pass ``systemd-analyze verify`` and start kindling with options it takes;
the Prometheus scrape config scrapes the daemon where its unit listens, with a token."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from kindling.cli.main import app

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
KINDLING = "/opt/kindling/venv/bin/kindling"


def exec_start(unit: Path) -> list[str]:
    line = next(line for line in unit.read_text().splitlines() if line.startswith("ExecStart="))
    return line.removeprefix("ExecStart=").split()


def verify(units: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", "verify", *map(str, units)], capture_output=True, text=True, timeout=60
    )


@pytest.fixture()
def installed_units(tmp_path: Path) -> list[Path]:
    """The units with ExecStart pointing at this environment's kindling (verify checks it exists)."""
    here = str(Path(sys.executable).parent / "kindling")
    copies = []
    for unit in UNITS:
        copy = tmp_path / unit.name
        copy.write_text(unit.read_text().replace(KINDLING, here))
        copies.append(copy)
    return copies


def test_there_are_units_for_the_daemon_the_proxy_and_mcp() -> None:
    assert [u.name for u in UNITS] == [
        "kindling-confirm.service",
        "kindling-mcp.service",
        "kindling-proxy.service",
    ]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_verifies_the_units(installed_units: list[Path], tmp_path: Path) -> None:
    result = verify(installed_units)
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stdout + result.stderr
    # The check can fail: a unit with a key systemd does not know, or a missing program, is reported.
    broken = tmp_path / "broken.service"
    broken.write_text(
        installed_units[0].read_text().replace("Restart=on-failure", "Restart=on-failure\nRestartt=1")
    )
    assert "Restartt" in verify([broken]).stderr


def test_the_units_start_kindling_with_options_it_takes() -> None:
    group = typer.main.get_command(app)  # typer's own click: its classes, looked at by what they have
    for unit in UNITS:
        argv = exec_start(unit)
        assert argv[0] == KINDLING, unit.name
        args = [re.sub(r"\$\{\w+\}", "http://127.0.0.1:1/v1", a) for a in argv[1:]]
        command: Any = group
        while args and args[0] in getattr(command, "commands", {}):
            command = command.commands[args.pop(0)]
        assert command is not group, unit.name
        context = command.make_context(command.name, list(args))  # raises on an unknown option
        assert context.params, unit.name
    # The check can fail: an option kindling does not take is refused.
    serve = group.commands["confirm"].commands["serve"]  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="no-such-option"):
        serve.make_context("serve", ["--no-such-option"])


@pytest.mark.parametrize("service", ["confirm", "proxy", "mcp"])
def test_the_scrape_config_matches_each_services_unit(service: str) -> None:
    config = yaml.safe_load((DEPLOY / "prometheus" / "kindling.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == f"kindling-{service}")
    argv = exec_start(DEPLOY / "systemd" / f"kindling-{service}.service")
    port = argv[argv.index("--port") + 1]
    host = argv[argv.index("--host") + 1]
    assert job["static_configs"][0]["targets"] == [f"{host}:{port}"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer" and job["authorization"]["credentials_file"]
    # Each service logs JSON lines under systemd.
    assert argv[argv.index("--log-format") + 1] == "json"
