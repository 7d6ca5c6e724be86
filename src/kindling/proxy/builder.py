"""Each tenant's template, built in the background from the conversations the proxy recorded.

The proxy warms a new conversation from the templates its tenant may see; this keeps one of them,
``proxy-<tenant>``, mined from the tenant's own recorded conversations, so warm-up starts with no
manual step. A tenant's template is (re)built after every ``every`` new conversations and on a
timer (every ``interval`` seconds while something new was recorded), never on a request's path:
builds are queued on a worker thread (``KeyedExecutor``), at most one waiting per tenant, and run
one at a time in a child process (mining never holds the interpreter that answers requests),
and a tenant's next build starts no sooner than ``gap`` seconds (or four times as long as its last
build took) after the last one ended, so a burst of conversations costs a share of one core at most.
A build that fails says so in the log and in ``status`` (and is tried again on the next
trigger); one that finds no call that worked yet leaves the tenant without a template and says so.

Only what the proxy relayed is mined (``kindling.sessions.recorded``), and each tenant's template
holds that tenant's conversations only.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kindling.proxy.recorder import Recorder

__all__ = ["TEMPLATE_PREFIX", "KeyedExecutor", "TemplateBuilder", "template_name"]

log = logging.getLogger("kindling.proxy")

TEMPLATE_PREFIX = "proxy-"


def template_name(tenant: str) -> str:
    """The template the proxy builds for ``tenant``."""
    return f"{TEMPLATE_PREFIX}{tenant}"


class KeyedExecutor:
    """Runs jobs one at a time on a worker thread; at most one job waits per key.

    ``submit`` for a key already waiting does nothing (the waiting job will see everything new);
    for a key whose job is running, it runs once more afterwards. A job that raises is logged with
    its traceback and the worker goes on. ``stop`` lets the running job finish and drops the rest.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: dict[str, Callable[[], object]] = {}
        self._order: deque[str] = deque()
        self._running: str | None = None
        self._again: set[str] = set()
        self._lock = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the worker thread."""
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def submit(self, key: str, job: Callable[[], object]) -> bool:
        """Queue ``job`` under ``key``; False when one is already waiting (this one is not needed)."""
        with self._lock:
            if key in self._jobs:
                return False
            if self._running == key:
                self._again.add(key)
                self._jobs[key] = job
                return True
            self._jobs[key] = job
            self._order.append(key)
            self._lock.notify()
            return True

    def pending(self, key: str) -> bool:
        """True while a job of ``key`` waits or runs."""
        with self._lock:
            return key in self._jobs or self._running == key

    def idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing waits or runs (at most ``timeout`` seconds); True when idle."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._jobs or self._running is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._lock.wait(left)
            return True

    def stop(self, timeout: float = 10.0) -> None:
        """Stop taking jobs; wait up to ``timeout`` seconds for the one running."""
        with self._lock:
            self._stopping = True
            self._jobs.clear()
            self._order.clear()
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._order and not self._stopping:
                    self._lock.wait()
                if self._stopping:
                    return
                key = self._order.popleft()
                job = self._jobs.pop(key)
                self._running = key
            try:
                job()
            except Exception:
                log.exception("background job %s failed", key)
            with self._lock:
                self._running = None
                if key in self._again:
                    self._again.discard(key)
                    if key in self._jobs:
                        self._order.append(key)
                self._lock.notify_all()


@dataclass
class TenantBuild:
    """What the builder knows of one tenant's template."""

    recorded: int = 0
    since: int = 0
    built_from: int = 0
    version: int | None = None
    examples: int = 0
    state: str = "waiting"
    error: str | None = None
    builds: int = 0
    built_at: float | None = None
    changed: bool = False
    warmed_from: dict[str, int] = field(default_factory=dict)
    not_before: float = 0.0
    deferred: bool = False


class TemplateBuilder:
    """Keeps ``proxy-<tenant>`` templates built from ``recorder``'s store, in the background.

    ``every`` new conversations of a tenant trigger a build (0: never; the timer still runs);
    ``interval`` seconds is how often the timer rebuilds tenants with something new.
    ``on_built`` is called after a build saved a new version (the proxy forgets its cached
    templates, so the next conversation warms from it at once).
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        templates: str | None = None,
        every: int = 5,
        interval: float = 600.0,
        gap: float = 30.0,
        on_built: Callable[[], None] | None = None,
    ) -> None:
        self.recorder = recorder
        self.templates_target = templates
        self.every = every
        self.interval = interval
        self.gap = gap
        self.on_built = on_built
        self.enabled = every > 0 or interval > 0
        self.executor = KeyedExecutor("kindling-proxy-builder")
        self._tenants: dict[str, TenantBuild] = {}
        self._lock = threading.Lock()
        self._loaded = False
        self.failed_builds = 0
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._store: Any = None
        self._executor_pool: ProcessPoolExecutor | None = None

    # -------------------------------------------------------------------------- life

    def start(self) -> None:
        """Start the worker and the timer; the tenants' counts are read first, on the worker."""
        if not self.enabled:
            return
        self._stop.clear()
        self.executor.start()
        self.executor.submit("(load)", self._load_and_build)
        if self._timer is None:
            self._timer = threading.Thread(target=self._tick, name="kindling-proxy-build-timer", daemon=True)
            self._timer.start()

    def stop(self) -> None:
        """Stop the timer and the worker (a build running finishes first), then the build process."""
        self._stop.set()
        self.executor.stop()
        if self._timer is not None:
            self._timer.join(5)
            self._timer = None
        pool, self._executor_pool = self._executor_pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def load(self) -> None:
        """Read how many conversations each tenant recorded and which template version it has.

        Blocking (the start-up line calls it before serving); a store that is down is logged and
        read again on the next build.
        """
        try:
            counts = self.recorder.store.tenant_sessions()
        except Exception as exc:
            log.warning("cannot read the tenants' conversation counts yet: %s", _line(exc))
            return
        store = self._templates()
        with self._lock:
            for tenant, count in counts.items():
                state = self._tenants.setdefault(tenant, TenantBuild())
                state.recorded = max(state.recorded, count)
            names = list(self._tenants)
        for tenant in names:
            self._read_template(store, tenant)
        self._loaded = True

    # -------------------------------------------------------------------------- triggers

    def conversation_started(self, tenant: str, warmed_from: str | None = None) -> None:
        """Count a new conversation of ``tenant`` (warmed from the template ``warmed_from``, if it
        was); queue a build of the tenant's template every ``every`` of them."""
        with self._lock:
            state = self._tenants.setdefault(tenant, TenantBuild())
            state.recorded += 1
            state.since += 1
            state.changed = True
            if warmed_from is not None:
                state.warmed_from[warmed_from] = state.warmed_from.get(warmed_from, 0) + 1
            due = self.every > 0 and state.since >= self.every
        if due and self.enabled:
            self.submit(tenant)

    def submit(self, tenant: str) -> bool:
        """Queue a build of ``tenant``'s template (one waits per tenant at most); one asked for
        within ``gap`` of the last is held until then. True when it was queued now."""
        with self._lock:
            state = self._tenants.setdefault(tenant, TenantBuild())
            if state.state not in ("building",):
                state.state = "queued"
            if time.monotonic() < state.not_before:
                state.deferred = True
                return False
            state.deferred = False
        return self.executor.submit(tenant, lambda: self.build(tenant))

    def _tick(self) -> None:
        # Once a second: builds held by the gap that are due now; every `interval`, the tenants
        # with something new.
        last_round = time.monotonic()
        while not self._stop.wait(1.0):
            now = time.monotonic()
            rebuild = self.interval > 0 and now - last_round >= self.interval
            if rebuild:
                last_round = now
            with self._lock:
                due = [
                    tenant
                    for tenant, state in self._tenants.items()
                    if (state.deferred and now >= state.not_before) or (rebuild and state.changed)
                ]
            for tenant in due:
                self.submit(tenant)

    def _load_and_build(self) -> None:
        self.load()
        if self.every <= 0:
            return
        with self._lock:
            due = [
                tenant
                for tenant, state in self._tenants.items()
                if state.recorded - state.built_from >= self.every
                or (state.version is None and state.recorded >= self.every)
            ]
        for tenant in due:
            self.submit(tenant)

    # -------------------------------------------------------------------------- building

    def build(self, tenant: str) -> dict[str, Any] | None:
        """Build ``tenant``'s template now (in the builder's child process, this thread waiting);
        return what it built (``version``, ``examples``, ``sessions``, ``unchanged``), or None.

        Waits (up to 10 s) for the recordings queued so far to be written, so the build sees
        them. A failure is logged and kept in ``status``; it never raises.
        """
        with self._lock:
            state = self._tenants.setdefault(tenant, TenantBuild())
            state.state = "building"
            state.since = 0
            state.changed = False
        self._drain(10.0)
        name = template_name(tenant)
        began = time.monotonic()
        job = {
            "name": name,
            "source": self.recorder.store.target,
            "templates": self._templates_target(),
            "tenant": tenant,
            "env": {k: v for k, v in os.environ.items() if k.startswith(("KINDLING_", "HERMES_"))},
        }
        try:
            result = self._pool().submit(build_in_child, job).result()
        except Exception as exc:  # the child died (killed, out of memory): a new one next time
            log.exception("building template %s failed: its process died", name)
            self._discard_pool()
            result = {"error": f"the build's process died: {type(exc).__name__}: {exc}", "quiet": False}
        if "error" in result:
            self._failed(tenant, str(result["error"]), began, quiet=bool(result.get("quiet")))
            return None
        with self._lock:
            self._rest(state, began)
            state.state = "built"
            state.error = None
            state.builds += 1
            state.built_at = time.time()
            state.built_from = result["sessions"]
            state.recorded = max(state.recorded, result["sessions"])
            state.version = result["version"]
            state.examples = result["examples"]
        if result["unchanged"]:
            log.info(
                "template %s v%d unchanged (%d conversations)", name, result["version"], result["sessions"]
            )
        else:
            log.info(
                "built template %s v%d from %d conversations: %d examples",
                name,
                result["version"],
                result["sessions"],
                result["examples"],
            )
            if self.on_built is not None:
                self.on_built()
        return result

    def _pool(self) -> ProcessPoolExecutor:
        # One child process builds, so mining never holds this process's interpreter (and its
        # memory goes back when the child ends with the proxy). Started on the first build.
        if self._executor_pool is None:
            self._executor_pool = ProcessPoolExecutor(max_workers=1, mp_context=_context())
        return self._executor_pool

    def _discard_pool(self) -> None:
        pool, self._executor_pool = self._executor_pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _templates_target(self) -> str:
        # Resolved here: the child may have started under another environment (a forkserver).
        from kindling.config import env_str, templates_dir

        return self.templates_target or env_str("KINDLING_TEMPLATE_STORE", "") or str(templates_dir())

    def _rest(self, state: TenantBuild, began: float) -> None:
        # Called holding the lock: the tenant's next build waits `gap`, or four times this one.
        ended = time.monotonic()
        state.not_before = ended + max(self.gap, 4 * (ended - began))

    def _failed(self, tenant: str, error: str, began: float, *, quiet: bool) -> None:
        with self._lock:
            state = self._tenants.setdefault(tenant, TenantBuild())
            self._rest(state, began)
            state.state = "failed"
            state.error = error
            self.failed_builds += 1
        if not quiet:
            log.error("building template %s failed: %s", template_name(tenant), error)
        else:
            log.warning("template %s not built: %s", template_name(tenant), error)

    def _drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.recorder.pending() and self.recorder.store_up and time.monotonic() < deadline:
            time.sleep(0.02)

    def _templates(self) -> Any:
        from kindling.templates.store import open_store

        if self._store is None:
            self._store = open_store(self.templates_target)
        return self._store

    def _read_template(self, store: Any, tenant: str) -> None:
        from kindling.errors import KindlingError

        try:
            template = store.get(template_name(tenant))
        except KindlingError:
            return
        with self._lock:
            state = self._tenants.setdefault(tenant, TenantBuild())
            state.version = template.version
            state.examples = len(template.examples)
            state.state = "built"

    # -------------------------------------------------------------------------- reporting

    def build_counts(self) -> tuple[int, int]:
        """Return how many builds saved a template and how many failed, over every tenant."""
        with self._lock:
            return sum(state.builds for state in self._tenants.values()), self.failed_builds

    def status(self, tenant: str, counts: dict[str, int]) -> dict[str, Any]:
        """What ``/kindling/status`` says of ``tenant``'s template: its state in words and figures.

        ``counts`` are the conversations of the tenant this proxy started and warmed.
        """
        with self._lock:
            state = self._tenants.get(tenant) or TenantBuild()
            data: dict[str, Any] = {
                "name": template_name(tenant),
                "state": state.state if self.enabled else "off",
                "version": state.version,
                "examples": state.examples,
                "recorded": state.recorded,
                "built_from": state.built_from,
                "builds": state.builds,
                "build_every": self.every,
                "error": state.error,
                "conversations": counts.get("conversations", 0),
                "warmed": counts.get("warmed", 0),
                "warmed_from": dict(state.warmed_from),
            }
        data["summary"] = describe(data)
        return data


def build_in_child(job: dict[str, Any]) -> dict[str, Any]:
    """Build one tenant's template (run in the builder's child process); return what was built, or
    ``{"error": ..., "quiet": ...}``: plain data, so nothing but strings and numbers cross back."""
    for key in [k for k in os.environ if k.startswith(("KINDLING_", "HERMES_"))]:
        if key not in job["env"]:
            del os.environ[key]
    os.environ.update(job["env"])
    from kindling.errors import KindlingError
    from kindling.templates.build import build_template_with_report
    from kindling.templates.store import open_store

    try:
        result = build_template_with_report(
            job["name"],
            [job["source"]],
            store=open_store(job["templates"]),
            tenant=job["tenant"],
            description=f"Built by kindling's proxy from the conversations of tenant {job['tenant']}.",
        )
    except KindlingError as exc:
        # Nothing to keep yet (no call that worked) is a state, not a fault: said, not shouted.
        return {"error": str(exc), "quiet": str(exc).startswith("No examples to keep")}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", "quiet": False}
    template = result.template
    return {
        "version": template.version,
        "examples": len(template.examples),
        "sessions": result.report.sessions,
        "unchanged": result.unchanged,
    }


def _context() -> Any:
    # A child forked from a clean process (forkserver), never from this one and its threads.
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["kindling.proxy.builder"])
        return context
    return multiprocessing.get_context("spawn")


def describe(data: dict[str, Any]) -> str:
    """One line on a tenant's template, as the start-up line and ``proxy status`` say it."""
    name, version = data["name"], data["version"]
    if data["state"] == "off" and version is None:
        return "no template built in the background (--build-every 0)"
    if version is None:
        if data["state"] in ("queued", "building"):
            text = f"building the first template from {data['recorded']} conversations"
        elif data["error"]:
            text = f"no template yet ({data['recorded']} conversations recorded: {data['error']})"
        else:
            text = f"no template yet ({data['recorded']} of {data['build_every']} conversations recorded)"
    else:
        built = f" from {data['built_from']} conversations" if data["built_from"] else ""
        text = f"template {name} v{version}{built}, {data['examples']} examples"
        if data["state"] in ("queued", "building"):
            text += "; rebuilding"
    started, warmed = data["conversations"], data["warmed"]
    if started:
        sources = ", ".join(f"{t} {n}" for t, n in sorted(data["warmed_from"].items()))
        text += f"; warmed {warmed} of {started} new conversations" + (f" ({sources})" if sources else "")
    return text


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
