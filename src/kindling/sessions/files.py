"""File input every session reader shares: open, peek, stream lines, parse a whole document, read times.

A leaf module: it imports nothing from the readers, and every reader (and ``sources``, which only
detects and dispatches) imports what it needs from here. Keeping these in one place means one
answer to "what does a gzip file cut short count as" and one to "what time is this value".
"""

from __future__ import annotations

import gzip
import io
import math
import os
import sqlite3
import urllib.parse
import zlib
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

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


def peek(path: Path, size: int = PEEK_BYTES) -> bytes:
    """Return the first ``size`` bytes of ``path`` (decompressed when it is gzip). Raises SourceError."""
    return peek_head(path, size)[0]


def peek_head(path: Path, size: int = PEEK_BYTES) -> tuple[bytes, bool, bool]:
    """Return ``(head, whole, compressed)``: the first ``size`` bytes of ``path`` (decompressed when it is gzip).

    ``whole`` says the head is shorter than asked for: all of the file, or for gzip all that
    decompressing its start gave (a cut archive ends early); ``compressed`` that the file is gzip.
    Raises SourceError when the file cannot be read.
    """
    head = _read_head(path, size)
    compressed = head[:2] == GZIP_MAGIC
    if compressed:
        # Decompress only the start: a truncated archive must still be detectable.
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, size)
        except zlib.error as exc:
            raise SourceError(f"Cannot read {path}: it is not a valid gzip file ({exc}).", path=path) from exc
    return head, len(head) < size, compressed


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)


def _read_head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of ``path`` as stored (fewer when the file is shorter). Raises SourceError.

    Read through the file descriptor rather than a buffered file object: detection reads the head of
    every file of a folder, and for the small files most sessions are, building and closing a buffered
    reader costs as much as the read itself.
    """
    try:
        descriptor = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise SourceError(f"Cannot open {path}: {exc.strerror or exc}.", path=path) from exc
    try:
        head = os.read(descriptor, size)
        if 0 < len(head) < size:
            # A read may return less than asked before the end of the file: read on until it says
            # the end (an empty read) or the head is whole.
            parts = [head]
            got = len(head)
            while got < size:
                part = os.read(descriptor, size - got)
                if not part:
                    break
                parts.append(part)
                got += len(part)
            head = b"".join(parts)
    except OSError as exc:
        raise SourceError(f"Cannot open {path}: {exc.strerror or exc}.", path=path) from exc
    finally:
        os.close(descriptor)
    return head


def open_lines(path: Path) -> Iterator[bytes]:
    """Yield the raw lines of a file, transparently gunzipping gzip content.

    Raises SourceError when the file cannot be opened. A gzip stream that ends early raises
    ``EOFError`` (or ``gzip.BadGzipFile``) mid-iteration, for the caller to count.
    """
    return _lines(_open(path))


def _open(path: Path) -> BinaryIO:
    """Open ``path`` for reading (through gzip when it is compressed). Raises SourceError."""
    kept = _DETECTED.get(path)
    if kept is not None and kept[2] is not None:
        _document, data = _take_detected(path)
        if data is not None:
            return io.BytesIO(data)  # detection read all of it a moment ago
    try:
        handle: BinaryIO = path.open("rb")
    except OSError as exc:
        raise SourceError(f"Cannot open {path}: {exc.strerror or exc}.", path=path) from exc
    try:
        compressed = handle.read(2) == GZIP_MAGIC
        handle.seek(0)
    except OSError as exc:
        handle.close()
        raise SourceError(f"Cannot read {path}: {exc.strerror or exc}.", path=path) from exc
    if compressed:
        return gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[return-value]
    return handle


def _lines(handle: BinaryIO) -> Iterator[bytes]:
    # A GzipFile leaves open the file object it was handed: both are closed here.
    raw = handle.fileobj if isinstance(handle, gzip.GzipFile) else None
    try:
        yield from handle
    finally:
        handle.close()
        if raw is not None:
            raw.close()


def iter_records(path: Path, report: ReadReport, *, lists: bool = False) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each JSON object line of ``path``; count every bad line.

    The file is opened before this returns (SourceError when it cannot be). Reasons:
    ``invalid_utf8``, ``malformed_json``, ``truncated_record`` (the last line, cut short),
    ``not_an_object`` (valid JSON that is not an object), ``truncated_file`` (a gzip stream that
    ends early: the read stops there). ``lists`` yields JSON arrays too (a line holding one
    conversation as a list of messages).
    """
    return _records(_open(path), report, lists)


def _records(handle: BinaryIO, report: ReadReport, lists: bool) -> Iterator[tuple[int, Any]]:
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    number = 0
    try:
        for raw in _lines(handle):
            number += 1
            try:
                value = loads(raw)  # white space around the value (the newline) is allowed
            except decode_error:
                if raw.strip():
                    report.skip(bad_line_reason(raw))
                continue
            if isinstance(value, dict) or (lists and isinstance(value, list)):
                yield number, value
            else:
                report.skip(NOT_AN_OBJECT)
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


# What detection read of the file it looked at last, kept for the one read that follows it (a reader
# would open, read and parse the same file again): the parsed document, or the file's bytes when
# detection read all of it. Keyed by path, size and modification time, and taken once.
_DETECTED: dict[Path, tuple[tuple[int, int], Any, bytes | None]] = {}


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


# The key of what is handed straight to the reader that reads the file next (no stat to compare).
_HANDED = (-1, -1)


def keep_detected(
    path: Path, document: Any = None, *, data: bytes | None = None, handed: bool = False
) -> None:
    """Keep what detection just read of ``path`` for the next read of it.

    ``document`` is the parsed JSON document (for ``read_document``), ``data`` all of the file's
    bytes as stored (for ``iter_records``); either may be None. Kept content is used only while the
    file's size and modification time are unchanged, unless ``handed`` (the caller reads the file
    right away, as a folder read does).
    """
    _DETECTED.clear()
    if document is None and data is None:
        return
    key = _HANDED if handed else _stat_key(path)
    if key is not None:
        _DETECTED[path] = (key, document, data)


def _take_detected(path: Path) -> tuple[Any, bytes | None]:
    """``(document, data)`` kept for ``path`` when the file has not changed since, else ``(None, None)``."""
    kept = _DETECTED.pop(path, None)
    if kept is None or (kept[0] is not _HANDED and kept[0] != _stat_key(path)):
        return None, None
    return kept[1], kept[2]


def read_document(path: Path, report: ReadReport) -> Any:
    """Parse a whole-file JSON document (gzip or plain); None (counted) when it is not valid JSON.

    Raises SourceError when the file cannot be read.
    """
    document, data = _take_detected(path)
    if document is not None:
        return document
    if data is None:
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
    zulu = text[-1:] in ("Z", "z")
    if zulu:
        text = text[:-1]
    elif text.endswith("+00:00"):
        zulu, text = True, text[:-6]  # UTC written out: the same fast way as "Z"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        # UTC (said by the "Z", or taken for a time without a zone): counted from the epoch
        # directly, without building an aware copy first.
        return (moment - _EPOCH).total_seconds()
    return None if zulu else moment.timestamp()


_EPOCH = datetime(1970, 1, 1)


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
