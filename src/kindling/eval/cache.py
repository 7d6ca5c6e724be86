"""Every answer a model gave, kept in a results file so a run resumes and a re-run costs nothing.

The file is JSON Lines, one answer per line keyed by a hash of the request (endpoint, model, API
format, messages, tools and sampling options): a request met again is answered from the file.
Each line is appended with one ``write`` on a file opened for appending, as soon as its answer
arrives, so a run killed at any moment leaves every earlier line whole in the file; a line cut
short (a machine that lost power before the file was synced at the end of the run) is counted as
malformed and skipped when the file is read again, and that request is simply asked again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from kindling.errors import StoreError

__all__ = ["ResultsCache", "request_key"]


def request_key(request: Mapping[str, Any]) -> str:
    """Return the hash that names ``request`` (a JSON-ready mapping) in a results file."""
    payload = orjson.dumps(request, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(payload).hexdigest()


class ResultsCache:
    """The answers of a results file, by request key; ``put`` appends one.

    ``malformed`` counts the lines that could not be read (a line cut short by a killed run).
    Raises StoreError when the file cannot be read or written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.malformed = 0
        self._answers: dict[str, dict[str, Any]] = {}
        self._fd: int | None = None
        self._load()

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"Cannot read {self.path}: {exc.strerror or exc}.", path=self.path) from exc
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.malformed += 1
                continue
            key = record.get("key") if isinstance(record, dict) else None
            if not isinstance(key, str) or not isinstance(record.get("answer"), dict):
                self.malformed += 1
                continue
            self._answers[key] = record["answer"]

    def __len__(self) -> int:
        return len(self._answers)

    def __contains__(self, key: object) -> bool:
        return key in self._answers

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored answer of the request ``key`` names, or None."""
        return self._answers.get(key)

    def put(self, key: str, answer: Mapping[str, Any]) -> None:
        """Append ``answer`` for ``key`` as one line (synced by ``close``)."""
        line = orjson.dumps({"key": key, "answer": answer}) + b"\n"
        try:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
                if self._needs_newline(self._fd):
                    line = b"\n" + line  # the last line was cut short by a killed run
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(f"wrote {written} of {len(line)} bytes")
        except OSError as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise StoreError(f"Cannot write {self.path}: {reason}.", path=self.path) from exc
        self._answers[key] = dict(answer)

    def close(self) -> None:
        """Sync what was appended to disk and close the file. Raises StoreError when that fails."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.fsync(fd)
        except OSError as exc:
            raise StoreError(f"Cannot write {self.path}: {exc.strerror or exc}.", path=self.path) from exc
        finally:
            os.close(fd)

    def _needs_newline(self, fd: int) -> bool:
        size = os.fstat(fd).st_size
        if size == 0:
            return False
        return os.pread(fd, 1, size - 1) != b"\n"
