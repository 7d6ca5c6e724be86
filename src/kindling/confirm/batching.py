"""Group commit: write blocks from many threads share one transaction and one commit (one fsync).

Every state change of the confirmation store runs as a *block* inside the write transaction. A
block runs on its caller's thread under a savepoint, so one that fails is undone alone (the writer
thread's runs take savepoints only once a block fails: see ``run_together``); the first block to
finish then commits for every block that ran meanwhile (a group commit), and no block
returns before the commit that holds its writes, so nothing acknowledged is ever lost. While one
commit waits for the disk, the blocks that arrive queue up and share the next one: under load one
fsync serves many requests instead of one.

``BatchWriter`` carries an event loop's writes to that: one thread runs every write queued while
it was busy, one after another into the open transaction, and waits once for their commit, so a
batch of requests costs one thread hand-off each way instead of one per request (and no request
thread waits on a lock or a condition of its own).

The transaction holds the database's write lock (``BEGIN IMMEDIATE`` on SQLite, an advisory lock
on PostgreSQL) from its first block to its commit, so the state read when it opens (the audit
chain's head, say) stays true for every block in it, across daemons.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from kindling.db import store_error, translate_errors
from kindling.errors import StoreError

log = logging.getLogger("kindling.confirm")

State = TypeVar("State")
T = TypeVar("T")

# A batch waits this long at most for blocks already running to join it before committing.
_GATHER_SECONDS = 0.002
_MAX_BLOCKS = 256
# The writer thread, about to wait for writes, runs the group's ``when_idle`` work once this many
# writes were committed since it last ran (on SQLite a checkpoint: some 500-800 WAL pages by then,
# before SQLite's own checkpoint at 1,000 would run in a commit).
_IDLE_WRITES = 200


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
    SQLite, where a pool check-out and check-in per batch cost more than the batch's savepoints,
    and PostgreSQL, where they cost two round trips: a ping and a rollback); a kept connection the
    server has ended is replaced once when a batch begins on it. Otherwise each batch checks one
    out of the pool. ``when_idle(conn)`` is work for the kept connection between batches, which
    ``BatchWriter`` runs when it has nothing to write (``run_when_idle``).
    """

    def __init__(
        self,
        engine: Engine,
        target: str,
        begin: Callable[[Connection], State],
        copy: Callable[[State], State],
        *,
        keep_connection: bool = False,
        when_idle: Callable[[Connection], None] | None = None,
    ) -> None:
        self._engine = engine
        self._target = target
        self._begin = begin
        self._copy = copy
        self._keep = keep_connection
        self._when_idle = when_idle
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
        # In ``run_together``: the (batch number, block succeeded) of each block the thread ran,
        # whose commit it waits for once at the end instead of in each block.
        self._local = threading.local()

    @property
    def state(self) -> State:
        """The open transaction's shared state; only valid inside a block."""
        assert self._state is not None, "GroupCommit.state outside a block"
        return self._state

    def block(self) -> contextlib.AbstractContextManager[Connection]:
        """Run the body in the shared transaction (``with group.block() as conn``); return only
        once its writes are committed.

        An exception from the body undoes the body's writes alone and propagates (a database
        error as StoreError, as ``translate_errors`` says it); a failed commit raises StoreError
        in every block of the batch.
        """
        local = self._local
        if getattr(local, "optimistic", False):
            return _OptimisticBlock(self, local)
        return self._block(local)

    @contextlib.contextmanager
    def _block(self, local: Any) -> Iterator[Connection]:
        with self._cond:
            self._entering += 1
        number = 0
        ok = False
        try:
            # In a run of ``run_together`` its thread holds the connection lock for the whole run.
            with contextlib.nullcontext() if getattr(local, "held", False) else self._conn_lock:
                if self._conn is None:
                    self._open()
                conn, state = self._conn, self._state
                assert conn is not None and state is not None
                number = self._opened
                self._blocks += 1
                saved = self._copy(state)
                self._savepoint("SAVEPOINT kindling_block")
                try:
                    yield conn
                except BaseException as exc:
                    self._undo(number, saved)
                    if isinstance(exc, sa.exc.SQLAlchemyError):
                        raise store_error(exc, self._target, "write") from exc
                    raise
                self._savepoint("RELEASE SAVEPOINT kindling_block")
                ok = True
        finally:
            with self._cond:
                self._entering -= 1
                self._gathering.notify()
            joined: list[tuple[int, bool]] | None = getattr(self._local, "joined", None)
            if number and joined is not None:
                joined.append((number, ok))
            elif number and ok:
                self._wait_for_commit(number)
            elif number:
                # Undone, but the transaction it opened or joined must still end (and its
                # write lock go) even when no other block is there to commit it.
                with contextlib.suppress(StoreError):
                    self._wait_for_commit(number)

    def run_together(
        self,
        calls: Iterable[Callable[[], Any]],
        before_commit: Callable[[list[tuple[bool, Any]]], None] | None = None,
    ) -> list[tuple[bool, Any]]:
        """Run ``calls`` (taken one at a time: an iterator may yield more as they run) one after
        another on this thread, their blocks in the open transaction without waiting for a commit
        between them; then wait for (or lead) the commits holding their writes. Return
        ``(True, result)`` or ``(False, exception)`` per call, in order.

        The run is optimistic: it holds the connection for all its calls, and their blocks run
        without a savepoint each (two statements a block saved). Only when a block fails are the
        run's writes rolled back (to a savepoint the run took if it joined a transaction another
        thread opened; else the whole transaction, which only its own blocks wrote), and its calls
        so far run again, each block under its own savepoint as ``block`` runs them, so that a
        failed block is still undone alone; so are the rest of the run's calls.

        A call whose writes were not committed gets the commit's StoreError, as ``block`` raises
        it; a call that raised keeps its own exception (its failed block was undone).
        ``before_commit`` is given the calls' outcomes as they stand once all have run, before
        the wait for their commit: the same as the ones returned unless that commit fails.
        """
        joined: list[tuple[int, bool]] = []
        local = self._local
        local.joined = joined
        ran: list[tuple[bool, Any, int]] = []
        try:
            with self._conn_lock:
                local.held = True
                self._run_calls(iter(calls), joined, ran)
        finally:
            local.joined = None
            local.held = False
            local.optimistic = False
            local.mark = None
        if before_commit is not None:
            before_commit([(ok, value) for ok, value, _ in ran])
        failed: dict[int, StoreError] = {}
        for number in sorted({n for n, _ in joined}):
            try:
                self._wait_for_commit(number)
            except StoreError as exc:
                failed[number] = exc
        outcomes: list[tuple[bool, Any]] = []
        for i, (ok, value, start) in enumerate(ran):
            end = ran[i + 1][2] if i + 1 < len(ran) else len(joined)
            lost = next((failed[n] for n, wrote in joined[start:end] if wrote and n in failed), None)
            outcomes.append((False, lost) if lost is not None else (ok, value))
        return outcomes

    def _run_calls(
        self,
        calls: Iterator[Callable[[], Any]],
        joined: list[tuple[int, bool]],
        ran: list[tuple[bool, Any, int]],
    ) -> None:
        # Called holding the connection lock. The optimistic part of the run first, then, if a
        # block in it failed, the same calls again and the rest of the run with savepoints.
        local = self._local
        local.optimistic = True
        local.mark = None  # set by the run's first block: how to undo the run's writes
        local.spoiled = False
        retry: list[Callable[[], Any]] = []
        for call in calls:
            retry.append(call)
            ran.append(_outcome(call, len(joined)))
            if local.spoiled:
                break
        local.optimistic = False
        mark = local.mark
        if not local.spoiled:
            if mark is not None and mark[0] == "savepoint":
                self._release_mark(mark)
            return
        if not self._roll_back_run(mark):
            return  # the connection is gone: the run's blocks fail with the batch's error
        del joined[:]
        del ran[:]
        for call in itertools.chain(retry, calls):
            ran.append(_outcome(call, len(joined)))

    def _enter_optimistic(self, local: Any) -> tuple[Connection, int]:
        # A block of an optimistic run begins: no savepoint of its own (see _OptimisticBlock).
        if self._conn is None:
            self._open()
            if local.mark is None:
                local.mark = ("opened", self._opened)
        elif local.mark is None:
            # Joining a transaction another thread's blocks wrote in: undo only back to here.
            assert self._state is not None
            self._savepoint("SAVEPOINT kindling_run")
            local.mark = ("savepoint", self._opened, self._copy(self._state))
        assert self._conn is not None
        self._blocks += 1
        return self._conn, self._opened

    def _release_mark(self, mark: tuple[Any, ...]) -> None:
        try:
            self._savepoint("RELEASE SAVEPOINT kindling_run")
        except Exception as exc:  # the connection is gone: the whole batch fails
            self._abandon(mark[1], StoreError(f"Cannot write database: {exc}", path=self._target))

    def _roll_back_run(self, mark: tuple[Any, ...] | None) -> bool:
        # Undo an optimistic run's writes; False when that failed and the batch was abandoned.
        if mark is None:  # the block failed before it could begin: nothing was written
            return True
        kind, number = mark[0], mark[1]
        try:
            if kind == "savepoint":
                self._savepoint("ROLLBACK TO SAVEPOINT kindling_run")
                self._savepoint("RELEASE SAVEPOINT kindling_run")
                self._state = mark[2]
                return True
            conn = self._conn
            assert conn is not None
            with translate_errors(self._target, "write"):
                conn.rollback()
        except Exception as exc:
            self._abandon(number, StoreError(f"Cannot write database: {exc}", path=self._target))
            return False
        # Only this run wrote in that transaction, and nobody waits for it: the replay opens the next.
        self._let_go(conn, self._keep)
        with self._cond:
            self._finish(number, None)
        return True

    def run_when_idle(self) -> None:
        """Run the ``when_idle`` work on the connection kept between batches, if there is one and
        no batch is open. It is an optimisation: a failure is logged and otherwise ignored (a
        connection it broke is replaced when the next batch begins on it)."""
        if self._when_idle is None:
            return
        with self._conn_lock:
            conn = self._idle
            if conn is None or self._conn is not None:
                return
            try:
                self._when_idle(conn)
            except Exception as exc:
                log.warning("the confirmation writer's idle work failed: %s", exc)

    def close(self) -> None:
        """Close the connection kept between batches, if any (the store is closing)."""
        with self._conn_lock:
            if self._idle is not None:
                _close_quietly(self._idle)
                self._idle = None

    def _open(self) -> None:
        kept, self._idle = self._idle, None
        while True:
            conn = kept
            try:
                with translate_errors(self._target, "write"):
                    conn = conn or self._engine.connect()
                    self._state = self._begin(conn)
                    self._cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
                break
            except StoreError as exc:
                if conn is not None:
                    _close_quietly(conn)
                if kept is None or not _disconnected(exc):
                    raise
                # The server ended the kept connection (it restarted, or an idle timeout): nothing
                # ran in it yet, so begin once more on a new one.
                kept = None
            except BaseException:
                if conn is not None:
                    _close_quietly(conn)
                raise
        self._conn = conn
        self._opened += 1
        self._blocks = 0

    def _savepoint(self, sql: str) -> None:
        # On the DBAPI cursor: through SQLAlchemy each statement cost more than SQLite's work.
        try:
            execute_raw(self._cursor, self._driver_error, sql)
        except sa.exc.SQLAlchemyError as exc:
            raise store_error(exc, self._target, "write") from exc

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
                self._let_go(conn, self._keep and error is None)
            with self._cond:
                self._finish(number, error)

    def _let_go(self, conn: Connection, keep: bool) -> None:
        # The transaction is over: keep the connection for the next one (else close it).
        if keep:
            self._idle = conn
        else:
            _close_quietly(conn)
        self._conn = None
        self._state = None
        self._cursor = None


# A queued write: the call, the future its outcome goes to once committed, and for a staged write
# (``BatchWriter.run_staged``) the future its result goes to before the commit.
_Item = tuple[Callable[[], Any], "asyncio.Future[Any]", "asyncio.Future[Any] | None"]


class BatchWriter:
    """One thread that runs an event loop's store writes in batches (``GroupCommit.run_together``).

    ``await writer.run(call)`` queues ``call`` (a store method that writes through the group) and
    returns its result, or raises its exception, once the commit holding its writes is done. The
    thread takes everything queued at once, up to ``_MAX_BLOCKS``, and hands the answers back with
    one wake-up of each waiting loop per batch. It starts at the first write and stops at ``close``.
    ``run_staged`` hands a call's result over while its commit is still on its way to the disk, so
    the loop can prepare the answer meanwhile, and the commit separately.
    """

    def __init__(self, group: GroupCommit[Any], name: str) -> None:
        self._group = group
        self._name = name
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._stopping = False  # the thread took the stop mark

    async def run(self, call: Callable[[], T]) -> T:
        """Run ``call`` in the next batch; return what it returns (raise what it raises)."""
        if self._thread is None:
            self._start()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put((call, future, None))
        return await future

    async def run_staged(self, call: Callable[[], T]) -> tuple[T, asyncio.Future[None]]:
        """Run ``call`` in the next batch; return what it returns as soon as every call of the batch
        has run and their commit is under way, with a future the commit completes (it raises
        StoreError when the commit failed, and then nothing ``call`` wrote is stored).

        Whatever depends on the write being stored (an answer sent, a waiter woken) must wait for
        that future; what only prepares it can run while the disk syncs, when the loop would
        otherwise be idle. What ``call`` raises is raised once the commit is done, as ``run``
        raises it.
        """
        if self._thread is None:
            self._start()
        loop = asyncio.get_running_loop()
        committed: asyncio.Future[None] = loop.create_future()
        early: asyncio.Future[T] = loop.create_future()
        self._queue.put((call, committed, early))
        return await early, committed

    def close(self) -> None:
        """Finish the queued writes and stop the thread (the store is closing)."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(60)

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise StoreError("The confirmation store is closed.", path=self._name)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="kindling-writer", daemon=True)
                self._thread.start()

    def _serve(self) -> None:
        expected = 1  # how many writes the last batch held: their clients tend to come back together
        written = 0  # writes since the group's idle work last ran
        while True:
            try:
                first = self._queue.get_nowait()
            except queue.Empty:
                # Nothing to write: the clients are reading their answers. Run the group's idle
                # work now (it waits for the disk, with the GIL free), rather than in a batch.
                if written >= _IDLE_WRITES:
                    self._group.run_when_idle()
                    written = 0
                first = self._queue.get()
            if first is None:
                return
            items: list[_Item] = []
            staged: set[int] = set()  # the items whose result went to the loop before the commit
            try:
                outcomes = self._group.run_together(
                    self._gather(first, items, expected), functools.partial(_stage, items, staged)
                )
            except Exception as exc:  # a bug here must fail these writes loudly, not strand them
                log.exception("the confirmation writer failed")
                error = StoreError(f"Cannot write database: {exc}", path=self._name)
                outcomes = [(False, error)] * len(items)
            expected = max(1, len(items))
            written += len(items)
            answers: list[tuple[asyncio.Future[Any], tuple[bool, Any]]] = []
            for i, ((_, future, early), outcome) in enumerate(zip(items, outcomes, strict=True)):
                if early is None:
                    answers.append((future, outcome))
                elif i in staged:
                    answers.append((future, (True, None) if outcome[0] else outcome))
                else:
                    answers.append((early, outcome))
                    if outcome[0]:
                        answers.append((future, (True, None)))
            _hand_back(answers)
            if self._stopping:
                return

    def _gather(self, item: _Item, items: list[_Item], expected: int) -> Iterator[Callable[[], Any]]:
        # The batch's writes, taken from the queue as they run: a write queued while the earlier
        # ones ran (the database releases the GIL, so the loop reads requests meanwhile) joins the
        # same commit instead of waiting for the next one.
        until = 0.0
        while True:
            items.append(item)
            yield item[0]
            if len(items) >= _MAX_BLOCKS:
                return
            try:
                queued = self._queue.get_nowait()
            except queue.Empty:
                if len(items) >= expected:
                    return
                # Fewer than last time: the rest are likely being read on the loop; let them join
                # this commit (waiting here lets the loop run) rather than wait for the next.
                until = until or time.monotonic() + _GATHER_SECONDS
                left = until - time.monotonic()
                if left <= 0:
                    return
                try:
                    queued = self._queue.get(timeout=left)
                except queue.Empty:
                    return
            if queued is None:
                self._stopping = True
                return
            item = queued


class _OptimisticBlock:
    """A block of an optimistic run (``GroupCommit.run_together``): no savepoint; a failure marks
    the run to be rolled back and run again. A class, not a generator: one is made per write."""

    __slots__ = ("_group", "_local", "_number")

    def __init__(self, group: GroupCommit[Any], local: Any) -> None:
        self._group = group
        self._local = local
        self._number = 0

    def __enter__(self) -> Connection:
        conn, self._number = self._group._enter_optimistic(self._local)
        return conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        local = self._local
        if exc is None:
            local.joined.append((self._number, True))
            return
        local.spoiled = True
        if isinstance(exc, sa.exc.SQLAlchemyError):
            raise store_error(exc, self._group._target, "write") from exc


def _outcome(call: Callable[[], Any], start: int) -> tuple[bool, Any, int]:
    try:
        return (True, call(), start)
    except Exception as exc:
        return (False, exc, start)


def _stage(items: list[_Item], staged: set[int], outcomes: list[tuple[bool, Any]]) -> None:
    # Before the commit: the results of the staged writes that succeeded go to their loops (the
    # indexes of those go in ``staged``); the rest wait for the commit.
    answers = []
    for i, ((_, _, early), (ok, value)) in enumerate(zip(items, outcomes, strict=False)):
        if early is not None and ok:
            answers.append((early, (True, value)))
            staged.add(i)
    _hand_back(answers)


def _hand_back(answers: list[tuple[asyncio.Future[Any], tuple[bool, Any]]]) -> None:
    # From the writer thread: one wake-up of each waiting loop for all of its answers.
    by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
    for future, outcome in answers:
        by_loop.setdefault(future.get_loop(), []).append((future, outcome))
    for loop, theirs in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits
            loop.call_soon_threadsafe(_answer, theirs)


def _answer(answers: list[tuple[asyncio.Future[Any], tuple[bool, Any]]]) -> None:
    for future, (ok, value) in answers:
        if future.done():  # the waiting request was cancelled
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


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


def _disconnected(exc: StoreError) -> bool:
    cause = exc.__cause__
    return isinstance(cause, sa.exc.DBAPIError) and bool(cause.connection_invalidated)


def _close_quietly(conn: Connection) -> None:
    with contextlib.suppress(Exception):
        conn.close()
