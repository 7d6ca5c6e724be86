"""Durable memories in the files Hermes Agent reads: ``$HERMES_HOME/memories/MEMORY.md`` and ``USER.md``.

Each file is a list of entries joined by ``"\\n§\\n"``. ``MEMORY.md`` (target ``memory``) holds the
agent's notes, limited by default to 2,200 characters; ``USER.md`` (target ``user``) holds what
is known about the user, limited to 1,375. The limit counts the joined text, as Hermes does.

Every change is a read-modify-write under a cross-process file lock, written atomically, so two
reviews (threads or processes) writing at once lose nothing. A write that would pass the limit
is refused with a clear error, never truncated. Results have Hermes's shape:
``{"success": true, "message": "Entry added.", "target": ..., "usage": ...}`` or
``{"success": false, "error": ...}``.

The limits and the write gate come from Hermes's ``$HERMES_HOME/config.yaml`` unless given:
``memory.memory_char_limit``, ``memory.user_char_limit`` and ``memory.write_approval``. With the
gate on, a write is not made but staged as ``$HERMES_HOME/pending/memory/<id>.json`` in Hermes's own
pending format, so the person approves or rejects it with Hermes's ``/memory pending``.

Content Hermes's memory scan would block (instructions that hijack the agent, sending data to a
URL, reading or embedding secrets, editing agent configuration, invisible characters, ...) is
refused before anything is written, so nothing kindling writes shows up in Hermes as ``[BLOCKED]``.

Every successful write appends one provenance line (who wrote, from where, for which call) to
``provenance.jsonl`` beside the memory files; empty fields are dropped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from kindling.config import hermes_home
from kindling.errors import StoreError
from kindling.fileio import file_lock, write_atomic
from kindling.hermes_config import MemorySettings, memory_settings
from kindling.injection import HIDDEN_CHARS, MEMORY_PATTERNS, fold

logger = logging.getLogger(__name__)

ENTRY_DELIMITER = "\n§\n"
TARGET_FILES: dict[str, str] = {"memory": "MEMORY.md", "user": "USER.md"}
PROVENANCE_FILE = "provenance.jsonl"
# What is known about a person stays readable by that person only (Hermes's files are 0600 too).
PRIVATE_MODE = 0o600

Target = Literal["memory", "user"]


def memories_dir() -> Path:
    """Return Hermes's memory directory, ``$HERMES_HOME/memories``."""
    return hermes_home() / "memories"


@dataclass(frozen=True)
class Provenance:
    """Where a memory write came from. Empty fields are dropped from the log line."""

    write_origin: str = ""
    execution_context: str = ""
    session_id: str = ""
    parent_session_id: str = ""
    platform: str = ""
    tool_name: str = ""
    task_id: str = ""
    tool_call_id: str = ""

    def with_call(self, *, tool_name: str | None, tool_call_id: str | None) -> Provenance:
        """Return a copy naming the tool call that made the write."""
        return Provenance(
            **{**asdict(self), "tool_name": tool_name or "", "tool_call_id": tool_call_id or ""}
        )

    def as_dict(self) -> dict[str, str]:
        """Return the non-empty fields."""
        return {key: value for key, value in asdict(self).items() if value}


class MemoryStore:
    """MEMORY.md and USER.md in one directory, with Hermes's limits and result shapes."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        memory_limit: int | None = None,
        user_limit: int | None = None,
        write_approval: bool | None = None,
        lock_timeout: float = 30.0,
    ) -> None:
        """Open the store; limits and the write gate left as None come from Hermes's config.yaml.

        Raises ConfigError when config.yaml is needed and broken.
        """
        self.directory = Path(directory) if directory is not None else memories_dir()
        needs_config = None in (memory_limit, user_limit, write_approval)
        settings = memory_settings() if needs_config else MemorySettings()
        self.limits: dict[str, int] = {
            "memory": memory_limit if memory_limit is not None else settings.memory_char_limit,
            "user": user_limit if user_limit is not None else settings.user_char_limit,
        }
        self.write_approval: bool = write_approval if write_approval is not None else settings.write_approval
        self.lock_timeout = lock_timeout

    @property
    def pending_dir(self) -> Path:
        """Return where gated writes are staged: ``pending/memory`` beside the memories directory."""
        return self.directory.parent / "pending" / "memory"

    # -- reading ---------------------------------------------------------------------------

    def path(self, target: str) -> Path:
        """Return the file of ``target`` (``memory`` or ``user``). Raises StoreError for others."""
        return self.directory / TARGET_FILES[_check_target(target)]

    @property
    def provenance_path(self) -> Path:
        """Return the append-only provenance log, ``provenance.jsonl`` beside the memory files."""
        return self.directory / PROVENANCE_FILE

    def entries(self, target: str) -> list[str]:
        """Return the entries of ``target`` in file order (empty when the file does not exist).

        Raises StoreError when the file exists but cannot be read.
        """
        return _read_entries(self.path(target))

    def usage(self, target: str, entries: list[str] | None = None) -> str:
        """Return Hermes's usage string, e.g. ``"12% — 264/2,200 chars"``."""
        current = _size(self.entries(target) if entries is None else entries)
        limit = self.limits[_check_target(target)]
        pct = min(100, int(current * 100 / limit)) if limit > 0 else 0
        return f"{pct}% — {current:,}/{limit:,} chars"

    def read_provenance(self) -> tuple[list[dict[str, Any]], int]:
        """Return the provenance records and how many lines were malformed (counted, skipped)."""
        records: list[dict[str, Any]] = []
        malformed = 0
        for line in _read_lines(self.provenance_path):
            try:
                value = json.loads(line)
            except ValueError:
                malformed += 1
                continue
            if isinstance(value, dict):
                records.append(value)
            else:
                malformed += 1
        return records, malformed

    # -- writing ---------------------------------------------------------------------------

    def apply(
        self,
        action: str,
        target: str = "memory",
        *,
        content: str | None = None,
        old_text: str | None = None,
        provenance: Provenance | None = None,
    ) -> dict[str, Any]:
        """Run one tool action (``add``, ``replace``, ``remove``) and return its result dict."""
        if target not in TARGET_FILES:
            return _failure(f"Invalid target '{target}'. Use 'memory' or 'user'.")
        if action == "add":
            return self.add(target, content or "", provenance=provenance)
        if action == "replace":
            return self.replace(target, old_text or "", content or "", provenance=provenance)
        if action == "remove":
            return self.remove(target, old_text or "", provenance=provenance)
        return _failure(f"Unknown action '{action}'. Use: add, replace, remove.")

    def add(self, target: str, content: str, *, provenance: Provenance | None = None) -> dict[str, Any]:
        """Append an entry; refuse an empty one or one that would pass the limit."""
        content = content.strip()
        if target not in TARGET_FILES:
            return _failure(f"Invalid target '{target}'. Use 'memory' or 'user'.")
        if not content:
            return _failure("Content cannot be empty.")
        unsafe = _content_refusal(content)
        if unsafe:
            return _failure(unsafe)
        with self._locked(target) as entries:
            if content in entries:
                return self._success(target, entries, "Entry already exists (no duplicate added).")
            updated = [*entries, content]
            refusal = self._over_limit(
                target, entries, updated, f"Adding this entry ({len(content):,} chars)"
            )
            if refusal:
                return refusal
            if self.write_approval:
                return self._stage("add", target, provenance, content=content)
            self._write(target, updated, "add", provenance, content=content)
            return self._success(target, updated, "Entry added.")

    def replace(
        self, target: str, old_text: str, content: str, *, provenance: Provenance | None = None
    ) -> dict[str, Any]:
        """Replace the one entry containing ``old_text`` with ``content``."""
        old_text, content = old_text.strip(), content.strip()
        if target not in TARGET_FILES:
            return _failure(f"Invalid target '{target}'. Use 'memory' or 'user'.")
        if not old_text:
            return _failure("old_text cannot be empty: give a short unique part of the entry to replace.")
        if not content:
            return _failure("content cannot be empty. Use 'remove' to delete an entry.")
        unsafe = _content_refusal(content)
        if unsafe:
            return _failure(unsafe)
        with self._locked(target) as entries:
            index = self._find_for_rewrite(target, entries, old_text)
            if isinstance(index, dict):
                return index
            updated = list(entries)
            updated[index] = content
            refusal = self._over_limit(target, entries, updated, "This replacement")
            if refusal:
                return refusal
            if self.write_approval:
                return self._stage("replace", target, provenance, content=content, old_text=old_text)
            self._write(target, updated, "replace", provenance, content=content, old_text=old_text)
            return self._success(target, updated, "Entry replaced.")

    def remove(self, target: str, old_text: str, *, provenance: Provenance | None = None) -> dict[str, Any]:
        """Remove the one entry containing ``old_text``."""
        old_text = old_text.strip()
        if target not in TARGET_FILES:
            return _failure(f"Invalid target '{target}'. Use 'memory' or 'user'.")
        if not old_text:
            return _failure("old_text cannot be empty: give a short unique part of the entry to remove.")
        with self._locked(target) as entries:
            index = self._find_for_rewrite(target, entries, old_text)
            if isinstance(index, dict):
                return index
            updated = entries[:index] + entries[index + 1 :]
            if self.write_approval:
                return self._stage("remove", target, provenance, old_text=old_text)
            self._write(target, updated, "remove", provenance, old_text=old_text)
            return self._success(target, updated, "Entry removed.")

    def pending(self) -> list[dict[str, Any]]:
        """Return the staged (not yet approved) memory writes, oldest first; unreadable ones skipped."""
        records: list[dict[str, Any]] = []
        if not self.pending_dir.is_dir():
            return records
        for path in sorted(self.pending_dir.glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError):
                logger.warning("Skipping unreadable pending memory write %s.", path)
                continue
            if isinstance(record, dict):
                records.append(record)
        records.sort(key=lambda r: r.get("created_at") or 0)
        return records

    # -- internals -------------------------------------------------------------------------

    def _stage(
        self, action: str, target: str, provenance: Provenance | None, **payload: str
    ) -> dict[str, Any]:
        """Stage a write for the person's approval, as Hermes does when ``write_approval`` is on.

        The record is Hermes's pending shape, so Hermes's own ``/memory pending`` lists it and
        ``/memory approve`` replays it: ``{id, subsystem, action, summary, origin, created_at, payload}``.
        """
        pending_id = uuid.uuid4().hex[:8]
        label = "user profile" if target == "user" else "memory"
        verb = {"add": "add to", "replace": "replace in", "remove": "remove from"}[action]
        detail = payload.get("content") or payload.get("old_text") or ""
        if action == "replace":
            detail = f"old: {payload.get('old_text', '')}\nnew: {payload.get('content', '')}"
        record = {
            "id": pending_id,
            "subsystem": "memory",
            "action": action,
            "summary": f"{verb} {label}: {detail[:120]}",
            # kindling writes from its review run, never from the person's own turn.
            "origin": "background_review",
            "created_at": time.time(),
            "payload": {
                "action": action,
                "target": target,
                "content": payload.get("content"),
                "old_text": payload.get("old_text"),
            },
        }
        path = self.pending_dir / f"{pending_id}.json"
        write_atomic(path, json.dumps(record, ensure_ascii=False, indent=2), mode=PRIVATE_MODE)
        log: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "action": f"stage-{action}",
            "target": target,
            "pending_id": pending_id,
            **{k: v for k, v in payload.items() if v},
        }
        log.update((provenance or Provenance()).as_dict())
        self._append_provenance(log)
        return {
            "success": True,
            "staged": True,
            "pending_id": pending_id,
            "target": target,
            "message": (
                "Staged for approval (memory.write_approval is on in Hermes's config.yaml). "
                "Not yet saved: review it in Hermes with /memory pending."
            ),
        }

    @contextlib.contextmanager
    def _locked(self, target: str) -> Iterator[list[str]]:
        """Hold the target's file lock and yield its entries as read under the lock."""
        path = self.path(target)
        with file_lock(path, timeout=self.lock_timeout):
            yield _read_entries(path)

    def _find_for_rewrite(self, target: str, entries: list[str], old_text: str) -> int | dict[str, Any]:
        """Return the index of the one entry ``old_text`` names, or a failure result.

        An entry longer than the whole file's limit cannot have come from this tool: someone
        appended free text to the file (an editor, a shell, another program). Replacing or
        removing that "entry" would throw the appended text away, so the file is backed up
        to ``<file>.bak.<time>`` and the change refused, as Hermes Agent does.
        """
        index = _find_unique(entries, old_text)
        if isinstance(index, dict) or len(entries[index]) <= self.limits[target]:
            return index
        path = self.path(target)
        backup = path.with_name(f"{path.name}.bak.{int(time.time())}")
        write_atomic(backup, path.read_bytes(), mode=PRIVATE_MODE)
        logger.warning("%s holds text not written by the memory tool; backed up to %s.", path, backup)
        return {
            **_failure(
                f"Refusing to rewrite {path.name}: the entry matching '{old_text}' is "
                f"{len(entries[index]):,} chars, longer than the whole file's limit "
                f"({self.limits[target]:,}), so it holds text added outside the memory tool. "
                f"Nothing was written; a copy is at {backup}. Split that text into entries first."
            ),
            "backup": str(backup),
        }

    def _over_limit(
        self, target: str, before: list[str], after: list[str], what: str
    ) -> dict[str, Any] | None:
        limit = self.limits[target]
        if _size(after) <= limit:
            return None
        return _failure(
            f"{what} would put {TARGET_FILES[target]} at {_size(after):,}/{limit:,} chars, over the limit "
            f"(now {_size(before):,}). Nothing was written: replace or remove entries to make room first."
        )

    def _write(
        self,
        target: str,
        entries: list[str],
        action: str,
        provenance: Provenance | None,
        **details: str,
    ) -> None:
        write_atomic(self.path(target), ENTRY_DELIMITER.join(entries), mode=PRIVATE_MODE)
        record: dict[str, Any] = {"ts": round(time.time(), 3), "action": action, "target": target, **details}
        record.update((provenance or Provenance()).as_dict())
        self._append_provenance(record)

    def _append_provenance(self, record: Mapping[str, Any]) -> None:
        path = self.provenance_path
        line = json.dumps(record, ensure_ascii=False, sort_keys=True)
        # The log is append-only, but every write is still whole-file atomic (the project's rule):
        # a crash leaves the previous log intact rather than a torn last line. Memory writes are
        # rare and the log is small, so rewriting it costs nothing that matters.
        with file_lock(path, timeout=self.lock_timeout):
            try:
                existing = path.read_bytes() if path.exists() else b""
            except OSError as exc:
                raise StoreError(f"Cannot read {path}: {exc.strerror or exc}.", path=path) from exc
            if existing and not existing.endswith(b"\n"):
                existing += b"\n"
            write_atomic(path, existing + line.encode("utf-8") + b"\n", mode=PRIVATE_MODE)

    def _success(self, target: str, entries: list[str], message: str) -> dict[str, Any]:
        return {
            "success": True,
            "message": message,
            "target": target,
            "usage": self.usage(target, entries),
            "entry_count": len(entries),
        }


_DELIMITER_REFUSAL = (
    "Content cannot contain the entry separator (a line holding only '§'): it would be read "
    "back as several entries. Make one call per entry."
)

# Long text is scanned in full: an entry is small, and a payload past a fixed cap must not slip by.


def _content_refusal(content: str) -> str | None:
    """Return why ``content`` may not become a memory entry, or None when it may."""
    if ENTRY_DELIMITER in content:
        return _DELIMITER_REFUSAL
    hidden = sorted(HIDDEN_CHARS.intersection(content))
    if hidden:
        codes = ", ".join(f"U+{ord(ch):04X}" for ch in hidden)
        return (
            f"Content contains invisible or direction-changing characters ({codes}); write it in plain text."
        )
    folded = fold(content)  # full-width look-alikes fold to ASCII
    for pattern, why in MEMORY_PATTERNS:
        if pattern.search(folded):
            return (
                f"Refused: this entry {why}. Memory is pasted into every future system prompt, "
                "so it must hold facts and preferences, not instructions to obey or secrets to send."
            )
    return None


def _check_target(target: str) -> Target:
    if target not in TARGET_FILES:
        raise StoreError(f"Unknown memory target {target!r}: use 'memory' or 'user'.")
    return target  # type: ignore[return-value]


def _failure(message: str) -> dict[str, Any]:
    return {"success": False, "error": message}


def _size(entries: list[str]) -> int:
    return len(ENTRY_DELIMITER.join(entries)) if entries else 0


def _find_unique(entries: list[str], old_text: str) -> int | dict[str, Any]:
    """Return the index of the one entry containing ``old_text``, or a failure result."""
    matches = [i for i, entry in enumerate(entries) if old_text in entry]
    if not matches:
        return _failure(f"No entry matched '{old_text}'.")
    if len({entries[i] for i in matches}) > 1:
        return _failure(f"Multiple entries matched '{old_text}'. Be more specific.")
    return matches[0]


def _read_entries(path: Path) -> list[str]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"Cannot read {path}: {exc}.", path=path) from exc
    return [entry.strip() for entry in raw.split(ENTRY_DELIMITER) if entry.strip()]


def _read_lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.strip():
                    yield line
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"Cannot read {path}: {exc.strerror or exc}.", path=path) from exc
