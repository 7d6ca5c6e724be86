"""Which files below a folder are sessions: coding agents' homes and plain folders of session files.

A leaf of the readers (it knows the homes' layouts, not their formats' content): ``sources`` lists a
folder source through it and reads each file it names.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

CLAUDE_CODE = "claude-code"
CODEX = "codex"

#: Names a session file below a folder source may have.
SESSION_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".traj")
# Where a coding agent's home keeps its sessions, and the files there that are sessions.
_HOMES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (CLAUDE_CODE, ("projects",), "*.jsonl"),
    (CODEX, ("sessions", "archived_sessions"), "rollout-*.jsonl*"),
)
# The files of an OpenHands event stream (``events/<n>.json``).
EVENT_FILE = re.compile(r"^(\d+)\.json$")


def home_format(directory: Path) -> str | None:
    """``claude-code`` for a Claude Code home (``~/.claude``), ``codex`` for a Codex home, else None."""
    if (directory / "projects").is_dir() and (
        (directory / "settings.json").exists()
        or directory.name == ".claude"
        or _has(directory / "projects", "*.jsonl")
    ):
        return CLAUDE_CODE
    if (directory / "sessions").is_dir() and _has(directory / "sessions", "rollout-*.jsonl*"):
        return CODEX
    return None


def agent_homes(home: Path | None = None) -> list[tuple[str, Path]]:
    """Return ``(format, folder)`` for each coding agent's home under ``home`` (default: the user's) holding sessions.

    Claude Code's ``~/.claude`` (``CLAUDE_CONFIG_DIR`` overrides) and Codex's ``~/.codex``
    (``CODEX_HOME`` overrides), each only when it holds a session file.
    """
    base = home or Path.home()
    found: list[tuple[str, Path]] = []
    claude = (
        Path(os.environ["CLAUDE_CONFIG_DIR"])
        if home is None and os.environ.get("CLAUDE_CONFIG_DIR")
        else base / ".claude"
    )
    codex = (
        Path(os.environ["CODEX_HOME"]) if home is None and os.environ.get("CODEX_HOME") else base / ".codex"
    )
    for fmt, folder in ((CLAUDE_CODE, claude), (CODEX, codex)):
        try:
            if (
                folder.is_dir()
                and home_format(folder) == fmt
                and next(session_files(folder), None) is not None
            ):
                found.append((fmt, folder))
        except OSError:
            continue
    return found


def _has(directory: Path, pattern: str) -> bool:
    return next(directory.rglob(pattern), None) is not None


def session_files(directory: Path) -> Iterator[Path]:
    """Yield the session files below ``directory`` in name order, subfolders included.

    A coding agent's home yields only its session files (``projects/**/*.jsonl`` of ``~/.claude``,
    ``sessions/**/rollout-*.jsonl`` of ``~/.codex``); any other folder every ``.jsonl``, ``.json``
    and ``.traj`` file (gzip too), hidden folders left out, and an OpenHands event stream (an
    ``events/`` folder of numbered files) as one source. Raises OSError when the folder cannot be listed.
    """
    for path, _stream in session_entries(directory):
        yield path


def session_entries(directory: Path) -> Iterator[tuple[Path, bool]]:
    """``session_files`` with, for each, whether it is an OpenHands event stream (a folder) rather than a file.

    Raises OSError when the folder cannot be listed.
    """
    home = home_format(directory)
    for fmt, folders, pattern in _HOMES:
        if fmt == home:
            for folder in folders:
                if (directory / folder).is_dir():
                    for path in sorted((directory / folder).rglob(pattern)):
                        yield path, False
            return
    yield from _walk(directory)


def is_event_directory(path: Path) -> bool:
    """Whether ``path`` is an OpenHands event stream (a folder of ``<n>.json`` files)."""
    try:
        return path.is_dir() and any(EVENT_FILE.match(child.name) for child in path.iterdir())
    except OSError:
        return False


def _walk(top: Path) -> Iterator[tuple[Path, bool]]:
    # Depth first in name order, with a stack of listings rather than nested generators (a file
    # deep down would otherwise pass through one generator per level), and os.scandir, whose
    # listing says which entries are folders without a stat per file.
    stack = [(top, iter(_listing(top)))]
    while stack:
        folder, entries = stack[-1]
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            if entry.is_dir():
                path = _child(folder, name)
                if name == "events" and is_event_directory(path):
                    yield path, True
                else:
                    stack.append((path, iter(_listing(entry.path))))
                    break
            elif name.endswith(SESSION_SUFFIXES) and entry.is_file():
                yield _child(folder, name), False
        else:
            stack.pop()


# ``folder / name`` for a name a listing gave (one part, nothing to parse): pathlib's own way of making
# the paths of a folder's entries (what ``Path.iterdir`` and ``Path.glob`` use), a tenth of the cost of
# parsing a path string for every file of a large history. Plain ``/`` where it is not there.
_child: Callable[[Path, str], Path] = getattr(Path, "_make_child_relpath", operator.truediv)


def _listing(directory: str | Path) -> list[os.DirEntry[str]]:
    with os.scandir(directory) as listing:
        return sorted(listing, key=_NAME)


_NAME = operator.attrgetter("name")
