"""`make install`'s script and the machine description the benchmarks page asks for.

The install itself (a virtual environment with every dependency) takes minutes and the package index, so the
suite runs what it can without them: the uninstall path and the refusal to replace a file that is not its link.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "install"


def _run(*args: str, prefix: Path, bindir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PREFIX": str(prefix), "BINDIR": str(bindir), "PYTHON": sys.executable}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def test_uninstall_removes_its_link_and_environment(tmp_path: Path) -> None:
    venv = tmp_path / "share" / "kindling-agent" / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "kindling").write_text("#!/bin/sh\n", encoding="utf-8")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "kindling").symlink_to(venv / "bin" / "kindling")
    done = _run("--uninstall", prefix=tmp_path, bindir=bindir)
    assert done.returncode == 0, done.stderr
    assert not (bindir / "kindling").exists() and not (bindir / "kindling").is_symlink()
    assert not venv.exists() and not venv.parent.exists()


def test_uninstall_leaves_another_kindling_alone(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    other = bindir / "kindling"
    other.write_text("#!/bin/sh\necho another\n", encoding="utf-8")
    done = _run("--uninstall", prefix=tmp_path, bindir=bindir)
    assert done.returncode == 0, done.stderr
    assert other.read_text(encoding="utf-8").endswith("another\n")
    assert "Left" in done.stdout


def test_install_refuses_to_replace_a_file_that_is_not_its_link(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "kindling").write_text("#!/bin/sh\n", encoding="utf-8")
    done = _run(prefix=tmp_path, bindir=bindir)
    assert done.returncode == 1
    assert "is not a link" in done.stderr
    assert not (tmp_path / "share").exists()  # nothing was built


def test_machine_bench_prints_cores_and_disk_sync(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "machine.py"), "--dir", str(tmp_path), "--syncs", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"cores {os.cpu_count()}," in done.stdout
    assert " µs (median of 3)" in done.stdout
