"""The daemon's background loops, started and stopped by the app's lifespan.

The expiry sweeper marks pending requests past their timeout ``expired`` (a timeout denies) whether
or not anyone looks; the outbox worker delivers notifications. Both log failures loudly and keep
going: a database hiccup must not silently stop expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kindling.confirm.notify import Deliveries
from kindling.confirm.store import ConfirmationStore
from kindling.errors import KindlingError

log = logging.getLogger("kindling.confirm")


async def _every(
    interval: float,
    stop: asyncio.Event,
    name: str,
    work: Callable[[], Any],
    then: Callable[[Any], None] | None = None,
) -> None:
    failing = ""  # the last failure's message: the same failure again is not logged again
    while not stop.is_set():
        try:
            result = await asyncio.to_thread(work)
            if then is not None:
                then(result)
            if failing:
                log.warning("the %s works again", name)
            failing = ""
        except KindlingError as exc:  # a sentence already (a dropped database, say): no traceback
            if str(exc) != failing:
                log.error("the %s failed; it will try again every %gs: %s", name, interval, exc)
            failing = str(exc)
        except Exception as exc:
            if repr(exc) != failing:
                log.exception("the %s failed; it will try again every %gs", name, interval)
            failing = repr(exc)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)


async def run_sweeper(
    store: ConfirmationStore,
    interval: float,
    stop: asyncio.Event,
    *,
    on_expired: Callable[[list[str]], None] | None = None,
) -> None:
    """Expire overdue pending requests every ``interval`` seconds until ``stop`` is set.

    ``on_expired`` runs on the event loop with the ids a sweep expired (to wake their waiters).
    """

    def after(expired: list[str]) -> None:
        if expired and on_expired is not None:
            on_expired(expired)

    await _every(interval, stop, "expiry sweeper", store.expire_due, after)


async def run_outbox(
    store: ConfirmationStore,
    interval: float,
    stop: asyncio.Event,
    *,
    on_delivered: Callable[[bool], None] | None = None,
) -> None:
    """Start sending due notifications every ``interval`` seconds until ``stop`` is set.

    Each target is sent to on its own thread (``Deliveries``), so a hanging one delays no other.
    ``on_delivered`` is told each attempt's result (True: sent), on the sending thread.
    """
    deliveries = Deliveries(store, on_delivered=on_delivered)
    try:
        await _every(interval, stop, "notification outbox worker", deliveries.dispatch)
    finally:
        await asyncio.to_thread(deliveries.close)


async def run_decision_watch(
    store: ConfirmationStore,
    waiting: Callable[[], list[str]],
    wake: Callable[[list[str]], None],
    interval: float,
    stop: asyncio.Event,
) -> None:
    """Every ``interval`` seconds, find which awaited requests were decided (by another daemon on
    the same database) with one query for all of them, and wake only their waiters.

    ``waiting`` and ``wake`` run on the event loop; the query on a worker thread.
    """
    failing = False
    while not stop.is_set():
        ids = waiting()
        if ids:
            try:
                wake(await asyncio.to_thread(store.decided_among, ids))
                failing = False
            except KindlingError as exc:
                if not failing:
                    log.error("the decision watch failed; it will try again in %gs: %s", interval, exc)
                failing = True
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)


async def run_token_checks(store: ConfirmationStore, interval: float, stop: asyncio.Event) -> None:
    """Check the token change counter every ``interval`` seconds, so cached tokens stay usable and
    a token revoked on any daemon is forgotten here within ``interval``."""
    await _every(interval, stop, "token check", store.check_tokens)
