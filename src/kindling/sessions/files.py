"""File input every session reader shares: open, peek, stream lines, parse a whole document, read times.

A leaf module: it imports nothing from the readers, and every reader (and ``sources``, which only
detects and dispatches) imports what it needs from here. Keeping these in one place means one
answer to "what does a gzip file cut short count as" and one to "what time is this value".
"""

from __future__ import annotations

import gzip
import math
import sqlite3
import urllib.parse
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from kindling.errors import SourceError
from kindling.sessions.model import ReadReport
from kindling.sessions.skips import (
    INVALID_UTF8,
    MALFORMED_JSON,
    NOT_AN_OBJECT,
    TRUNCATED_FILE,
    TRUNCATED_RECORD,
)

#: A JSONL line as ``iter_records`` yields it: its line number and its object.
Record = tuple[int, dict[str, Any]]

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
#: How much of a file detection looks at.
PEEK_BYTES = 256 * 1024
#: What may precede the first JSON character: a UTF-8 byte order mark and white space.
LEADING_BYTES = b"\xef\xbb\xbf \t\r\n"


def probe(path: Path) -> None:
    """Open ``path`` once and close it, so an unreadable file fails when a read starts, not midway.

    Raises SourceError when it cannot be opened.
    """
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise SourceError(f"Cannot open {path}: {exc.strerror or exc}.", path=path) from exc


def peek(path: Path) -> bytes:
    """Return the first bytes of ``path`` (decompressed when it is gzip). Raises SourceError."""
    try:
        with path.open("rb") as handle:
            head = handle.read(PEEK_BYTES)
    except OSError as exc:
        raise SourceError(f"Cannot open {path}: {exc.strerror or exc}.", path=path) from exc
    if head.startswith(GZIP_MAGIC):
        # Decompress only the start: a truncated archive must still be detectable.
        try:
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, PEEK_BYTES)
        except zlib.error as exc:
            raise SourceError(f"Cannot read {path}: it is not a valid gzip file ({exc}).", path=path) from exc
    return head


def open_lines(path: Path) -> Iterator[bytes]:
    """Yield the raw lines of a file, transparently gunzipping gzip content.

    Raises SourceError when the file cannot be opened. A gzip stream that ends early raises
    ``EOFError`` (or ``gzip.BadGzipFile``) mid-iteration, for the caller to count.
    """
    try:
        with path.open("rb") as first:
            compressed = first.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise SourceError(f"Cannot open {path}: {exc.strerror or exc}.", path=path) from exc
    if compressed:
        with gzip.open(path, "rb") as handle:
            yield from handle
    else:
        with path.open("rb") as handle:
            yield from handle


def iter_records(path: Path, report: ReadReport, *, lists: bool = False) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each JSON object line of ``path``; count every bad line.

    Reasons: ``invalid_utf8``, ``malformed_json``, ``truncated_record`` (the last line, cut short),
    ``not_an_object`` (valid JSON that is not an object), ``truncated_file`` (a gzip stream that
    ends early: the read stops there). ``lists`` yields JSON arrays too (a line holding one
    conversation as a list of messages).
    """
    lines = open_lines(path)
    number = 0
    try:
        for raw in lines:
            number += 1
            line = raw.strip()
            if not line:
                continue
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                report.skip(bad_line_reason(raw))
                continue
            if not isinstance(value, dict) and not (lists and isinstance(value, list)):
                report.skip(NOT_AN_OBJECT)
                continue
            yield number, value
    except (EOFError, gzip.BadGzipFile, zlib.error):
        report.skip(TRUNCATED_FILE)


def bad_line_reason(raw: bytes) -> str:
    """The skip reason for a line that is not JSON: invalid UTF-8, cut short (no newline), or malformed."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return INVALID_UTF8
    return MALFORMED_JSON if raw.endswith(b"\n") else TRUNCATED_RECORD


def read_bytes(path: Path, report: ReadReport) -> bytes | None:
    """Return the whole content of ``path``, gunzipped; None (counted as truncated_file) for a cut gzip.

    Raises SourceError when the file cannot be read.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise SourceError(f"Cannot read {path}: {exc.strerror or exc}.", path=path) from exc
    if data[:2] == GZIP_MAGIC:
        try:
            return gzip.decompress(data)
        except (EOFError, gzip.BadGzipFile, zlib.error):
            report.skip(TRUNCATED_FILE)
            return None
    return data


def parse_document(data: bytes, report: ReadReport) -> Any:
    """Parse a whole JSON document; None (counted once under its reason) when it is not valid JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "end of data" in str(exc):
            report.skip(TRUNCATED_FILE)
        else:
            report.skip(bad_line_reason(data + b"\n"))
        return None


# The document detection parsed last, kept for the one read that follows it (a reader would parse
# the same file again): keyed by path, size and modification time, taken once.
_DETECTED: dict[Path, tuple[tuple[int, int], Any]] = {}


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def keep_detected(path: Path, document: Any) -> None:
    """Keep the document detection just parsed from ``path`` for the next ``read_document`` of it."""
    key = _stat_key(path)
    _DETECTED.clear()
    if key is not None and document is not None:
        _DETECTED[path] = (key, document)


def read_document(path: Path, report: ReadReport) -> Any:
    """Parse a whole-file JSON document (gzip or plain); None (counted) when it is not valid JSON.

    Raises SourceError when the file cannot be read.
    """
    kept = _DETECTED.pop(path, None)
    if kept is not None and kept[0] == _stat_key(path):
        return kept[1]
    data = read_bytes(path, report)
    return None if data is None else parse_document(data, report)


def epoch(value: Any) -> float | None:
    """Return ``value`` as seconds since the epoch, or None when it is no time.

    Accepts numbers (seconds), numeric strings, ISO 8601 strings (a trailing ``Z`` is UTC) and
    ``datetime`` objects. A time without a zone (an ISO string or a naive datetime) is taken as
    UTC, so a file reads the same on every machine. Booleans, non-finite numbers and unparsable
    strings are None.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, datetime):
        return _aware(value).timestamp()
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if len(text) < 10 or text[4] != "-":  # "2025-…" is a date: skip the (raising) number parse
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return number if math.isfinite(number) else None
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"  # Python 3.10's fromisoformat does not read "Z"
    try:
        return _aware(datetime.fromisoformat(text)).timestamp()
    except ValueError:
        return None


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


class WalFiles:
    """Whether a SQLite database's ``-wal``/``-shm`` files existed before kindling opened it.

    A read-only connection to a WAL database creates both files and, being read-only, never removes
    them. ``release()`` (after every kindling connection is closed) removes them again when they
    were not there before, the way SQLite itself does: a short read-write connection that only
    reads, whose close checkpoints an empty log and deletes the files when it is the last
    connection. When another process has the database open the files are its own and stay.
    """

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()  # SQLite puts the files next to the file itself, not a link to it
        self.uri = f"file:{urllib.parse.quote(str(self.path))}?mode=ro"
        self.existed = any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))

    def release(self) -> None:
        """Remove the ``-wal``/``-shm`` files this read created, if no one else uses them."""
        if self.existed or not any(Path(f"{self.path}{suffix}").exists() for suffix in ("-wal", "-shm")):
            return
        try:
            conn = sqlite3.connect(self.uri.replace("?mode=ro", "?mode=rw"), uri=True, timeout=0)
            try:
                conn.execute("PRAGMA schema_version").fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            pass  # busy, or not writable by this user: the files stay, as they would have anyway
