"""Group commit: write blocks from many threads share one transaction and one commit (one fsync).

Every state change of the confirmation store runs as a *block* inside the write transaction. A
block runs on its caller's thread under a savepoint, so one that fails is undone alone; the first
block to finish then commits for every block that ran meanwhile (a group commit), and no block
returns before the commit that holds its writes, so nothing acknowledged is ever lost. While one
commit waits for the disk, the blocks that arrive queue up and share the next one: under load one
fsync serves many requests instead of one.

The transaction holds the database's write lock (``BEGIN IMMEDIATE`` on SQLite, an advisory lock
on PostgreSQL) from its first block to its commit, so the state read when it opens (the audit
chain's head, say) stays true for every block in it, across daemons.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from kindling.db import translate_errors
from kindling.errors import StoreError

State = TypeVar("State")

# A batch waits this long at most for blocks already running to join it before committing.
_GATHER_SECONDS = 0.002
_MAX_BLOCKS = 256


class FifoLock:
    """A lock handed to its waiters in arrival order.

    ``threading.Lock`` lets a thread that just released it take it again before the threads already
    waiting, so under load some requests wait many turns: a long latency tail.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiters: deque[threading.Lock] = deque()

    def __enter__(self) -> None:
        with self._mutex:
            if not self._held:
                self._held = True
                return
            gate = threading.Lock()
            gate.acquire()
            self._waiters.append(gate)
        gate.acquire()  # released by the holder, which hands the lock over still held

    def __exit__(self, *exc: object) -> None:
        with self._mutex:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False


class GroupCommit(Generic[State]):
    """Runs write blocks in shared transactions; see the module docstring.

    ``begin(conn)`` starts a transaction on a connection, takes the write lock and returns the
    state blocks share (it is copied before each block and restored if the block fails); ``copy``
    copies that state. With ``keep_connection`` one connection serves batch after batch (for
    SQLite, where a pool check-out and check-in per batch cost more than the batch's savepoints);
    otherwise each batch checks one out of the pool (PostgreSQL's, which tests it first).
    """

    def __init__(
        self,
        engine: Engine,
        target: str,
        begin: Callable[[Connection], State],
        copy: Callable[[State], State],
        *,
        keep_connection: bool = False,
    ) -> None:
        self._engine = engine
        self._target = target
        self._begin = begin
        self._copy = copy
        self._keep = keep_connection
        self._idle: Connection | None = None  # the kept connection between batches
        self._cursor: Any = None  # the open batch's DBAPI cursor, for the savepoints
        self._driver_error: type[Exception] = engine.dialect.dbapi.Error  # type: ignore[union-attr]
        self._conn_lock = FifoLock()  # whoever holds it uses the connection
        # Two wake-ups on one lock, which guards the counters below: a block ending wakes only the
        # leader gathering a batch (``_gathering``); a batch ending wakes the blocks waiting for
        # their commit (``_cond``). One condition for both woke every waiting block at every
        # block's end: under 32 clients, hundreds of thread wake-ups per commit.
        mutex = threading.Lock()
        self._cond = threading.Condition(mutex)
        self._gathering = threading.Condition(mutex)
        self._conn: Connection | None = None
        self._state: State | None = None
        self._opened = 0  # the number of the batch whose transaction is open
        self._blocks = 0  # blocks run in the open batch
        self._done = 0  # the highest batch number finished (committed or failed)
        self._errors: dict[int, StoreError] = {}
        self._entering = 0  # blocks waiting for the connection or running on it
        self._leading = False

    @property
    def state(self) -> State:
        """The open transaction's shared state; only valid inside a block."""
        assert self._state is not None, "GroupCommit.state outside a block"
        return self._state

    @contextlib.contextmanager
    def block(self) -> Iterator[tuple[Connection, State]]:
        """Run the body in the shared transaction; return only once its writes are committed.

        An exception from the body undoes the body's writes alone and propagates; a failed
        commit raises StoreError in every block of the batch.
        """
        with self._cond:
            self._entering += 1
        number = 0
        ok = False
        try:
            with self._conn_lock:
                if self._conn is None:
                    self._open()
                conn, state = self._conn, self._state
                assert conn is not None and state is not None
                number = self._opened
                self._blocks += 1
                saved = self._copy(state)
                self._savepoint("SAVEPOINT kindling_block")
                try:
                    yield conn, state
                except BaseException:
                    self._undo(number, saved)
                    raise
                self._savepoint("RELEASE SAVEPOINT kindling_block")
                ok = True
        finally:
            with self._cond:
                self._entering -= 1
                self._gathering.notify()
            if number and ok:
                self._wait_for_commit(number)
            elif number:
                # Undone, but the transaction it opened or joined must still end (and its
                # write lock go) even when no other block is there to commit it.
                with contextlib.suppress(StoreError):
                    self._wait_for_commit(number)

    def close(self) -> None:
        """Close the connection kept between batches, if any (the store is closing)."""
        with self._conn_lock:
            if self._idle is not None:
                _close_quietly(self._idle)
                self._idle = None

    def _open(self) -> None:
        conn, self._idle = self._idle, None
        try:
            with translate_errors(self._target, "write"):
                conn = conn or self._engine.connect()
                self._state = self._begin(conn)
                self._cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        except BaseException:
            if conn is not None:
                _close_quietly(conn)
            raise
        self._conn = conn
        self._opened += 1
        self._blocks = 0

    def _savepoint(self, sql: str) -> None:
        # On the DBAPI cursor: through SQLAlchemy each statement cost more than SQLite's work.
        with translate_errors(self._target, "write"):
            execute_raw(self._cursor, self._driver_error, sql)

    def _undo(self, number: int, saved: State) -> None:
        try:
            self._savepoint("ROLLBACK TO SAVEPOINT kindling_block")
            self._savepoint("RELEASE SAVEPOINT kindling_block")
            self._state = saved
        except Exception as exc:  # the connection is gone: the whole batch fails
            self._abandon(number, StoreError(f"Cannot write database: {exc}", path=self._target))

    def _abandon(self, number: int, error: StoreError) -> None:
        # Called holding the connection lock.
        if self._conn is not None:
            _close_quietly(self._conn)
        self._conn = None
        self._state = None
        self._cursor = None
        with self._cond:
            self._finish(number, error)

    def _finish(self, number: int, error: StoreError | None) -> None:
        # Called holding the condition.
        self._done = max(self._done, number)
        if error is not None:
            self._errors[number] = error
        for old in [n for n in self._errors if n < number - 1000]:
            del self._errors[old]
        self._cond.notify_all()

    def _wait_for_commit(self, number: int) -> None:
        while True:
            with self._cond:
                if self._done >= number:
                    error = self._errors.get(number)
                    if error is not None:
                        raise error
                    return
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                # Let the blocks already on their way join this commit.
                until = time.monotonic() + _GATHER_SECONDS
                while self._entering and self._blocks < _MAX_BLOCKS:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    self._gathering.wait(left)
            try:
                self._commit()
            finally:
                with self._cond:
                    self._leading = False
                    self._cond.notify_all()

    def _commit(self) -> None:
        with self._conn_lock:
            conn, number = self._conn, self._opened
            if conn is None:  # already abandoned
                return
            error: StoreError | None = None
            try:
                with translate_errors(self._target, "write"):
                    conn.commit()
            except StoreError as exc:
                error = exc
            finally:
                if self._keep and error is None:
                    self._idle = conn
                else:
                    _close_quietly(conn)
                self._conn = None
                self._state = None
                self._cursor = None
            with self._cond:
                self._finish(number, error)


def execute_raw(cursor: Any, driver_error: type[Exception], sql: str, params: Any = None) -> Any:
    """Run ``sql`` on a DBAPI cursor; return the cursor. A driver error (an instance of
    ``driver_error``) is raised as SQLAlchemy would raise it, so ``translate_errors`` and the
    daemon's error answers see what they see for statements run through SQLAlchemy."""
    try:
        if params is None:
            cursor.execute(sql)
        else:
            cursor.execute(sql, params)
    except driver_error as exc:
        raise sa.exc.DBAPIError.instance(sql, params, exc, driver_error) from exc
    return cursor


def _close_quietly(conn: Connection) -> None:
    with contextlib.suppress(Exception):
        conn.close()
