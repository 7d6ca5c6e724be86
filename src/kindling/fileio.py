"""Atomic file writes and cross-process file locks, shared by every file-backed store.

A write goes to a temporary file in the same directory, is flushed and fsynced, then replaces the
target with ``os.replace``: a reader sees the old file or the new one, never half of either, and a
process killed mid-write leaves the previous version in place.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from kindling.errors import StoreError

DEFAULT_LOCK_TIMEOUT = 30.0


def write_atomic(path: str | Path, data: str | bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically, creating parent directories.

    Raises StoreError when the directory cannot be created or written.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise StoreError(f"Cannot write {target}: {exc.strerror or exc}.", path=target) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise StoreError(f"Cannot write {target}: {exc.strerror or exc}.", path=target) from exc
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    # The rename itself is durable only once the directory entry is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_lock(path: str | Path, *, timeout: float = DEFAULT_LOCK_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive cross-process lock on ``<path>.lock`` for the duration of the block.

    Raises StoreError when the lock cannot be taken within ``timeout`` seconds.
    """
    target = Path(path)
    lock_path = target.with_name(target.name + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"Cannot create {lock_path.parent}: {exc.strerror or exc}.", path=lock_path) from exc
    lock = FileLock(str(lock_path), timeout=timeout)
    try:
        lock.acquire()
    except Timeout as exc:
        raise StoreError(
            f"{target} is locked by another process (waited {timeout:g}s).", path=target
        ) from exc
    try:
        yield
    finally:
        lock.release()
