"""The background review: when to run it, running it off the caller's thread, and what it changed.

After a turn, a review looks back over a snapshot of the conversation with the caller's own
runtime (model, endpoint, key) and the caller's system prompt byte for byte, so a provider's
prefix cache still hits. It may call only the memory and skill tools; any other call (terminal,
execute_code, write_file, ...) is answered with a denial and never executed.

It never blocks or breaks the caller's turn: :func:`spawn_review` only starts a thread and
returns a :class:`ReviewHandle`. Whatever goes wrong inside (endpoint down, timeout, malformed
response, a tool that raises, a bug) ends the review, is logged, and reaches the callback as
``"Self-improvement review failed: ..."``. Nothing fails silently.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kindling.agent.loop import Runtime, run
from kindling.agent.registry import ToolRegistry
from kindling.review.memory import MemoryStore, Provenance
from kindling.review.prompts import review_prompt
from kindling.review.protocol import ConversionReport, repair_tool_protocol
from kindling.review.skills import SkillStore
from kindling.review.tools import (
    MEMORY_TOOL,
    MEMORY_TOOLS,
    SKILL_MANAGE_TOOL,
    SKILL_TOOLS,
    review_tools,
)

logger = logging.getLogger(__name__)

SUMMARY_PREFIX = "Self-improvement review"
DEFAULT_MAX_ITERATIONS = 16
_MEMORY_MESSAGES = frozenset({"Entry added.", "Entry replaced.", "Entry removed."})
_TARGET_LABELS = {"memory": "Memory updated", "user": "User profile updated"}

Callback = Callable[[str], None]
_Work = Callable[[threading.Event], "ReviewOutcome"]


# -- triggers ------------------------------------------------------------------------------


@dataclass
class ReviewPlan:
    """Which reviews are due now."""

    memory: bool = False
    skills: bool = False

    def __bool__(self) -> bool:
        return self.memory or self.skills


@dataclass
class ReviewTriggers:
    """Counters deciding when a review is due.

    A memory review is due every ``memory_interval`` user turns, a skill review every
    ``skill_interval`` tool iterations (assistant messages that call tools). A counter resets
    when the agent itself used that kind of tool, since it is already keeping that up to date.
    An interval of 0 turns that review off.
    """

    memory_interval: int = 10
    skill_interval: int = 10
    user_turns: int = 0
    tool_iterations: int = 0

    def observe(self, turn_messages: Iterable[Mapping[str, Any]]) -> None:
        """Count one turn's messages (user messages, tool-calling iterations, tool use)."""
        for message in turn_messages:
            role = message.get("role")
            if role == "user":
                self.user_turns += 1
            elif role == "assistant" and message.get("tool_calls"):
                self.tool_iterations += 1
                names = {_call_name(call) for call in message.get("tool_calls") or ()}
                if names & MEMORY_TOOLS:
                    self.user_turns = 0
                if names & {SKILL_MANAGE_TOOL}:
                    self.tool_iterations = 0

    def due(self) -> ReviewPlan:
        """Return which reviews are due, without resetting anything."""
        return ReviewPlan(
            memory=self.memory_interval > 0 and self.user_turns >= self.memory_interval,
            skills=self.skill_interval > 0 and self.tool_iterations >= self.skill_interval,
        )

    def take(self) -> ReviewPlan:
        """Return which reviews are due and reset their counters (call when spawning them)."""
        plan = self.due()
        if plan.memory:
            self.user_turns = 0
        if plan.skills:
            self.tool_iterations = 0
        return plan


def _call_name(call: Any) -> str:
    if isinstance(call, Mapping):
        function = call.get("function") or {}
        return str(function.get("name") or call.get("name") or "")
    return ""


# -- summary -------------------------------------------------------------------------------


@dataclass
class ReviewOutcome:
    """What a review did: a one-line ``summary``, the ``actions`` behind it, and ``error``.

    ``error`` is None when the review ran to its end; ``denied`` names every tool call that was
    refused; ``messages`` is the review's whole conversation, for inspection.
    """

    summary: str
    actions: list[str] = field(default_factory=list)
    error: str | None = None
    denied: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list, repr=False)
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        """True when the review finished without error."""
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        """Return the outcome as JSON-ready data (without the messages)."""
        return {
            "summary": self.summary,
            "actions": list(self.actions),
            "error": self.error,
            "denied": list(self.denied),
            "cancelled": self.cancelled,
        }


def format_summary(actions: Sequence[str]) -> str:
    """Return ``"Self-improvement review: a · b"`` (or ``"...: nothing to save"``)."""
    return f"{SUMMARY_PREFIX}: {' · '.join(actions) if actions else 'nothing to save'}"


def failure_summary(error: str) -> str:
    """Return the line a callback gets when a review failed."""
    return f"{SUMMARY_PREFIX} failed: {error}"


def summarize_actions(
    review_messages: Sequence[Mapping[str, Any]], prior_snapshot: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Return the human-facing list of what a review changed, in order, without duplicates.

    Only successful memory and skill writes count ("Memory updated", "User profile updated",
    "Skill 'x' created", ...). Tool results already in ``prior_snapshot`` are skipped (matched
    by ``tool_call_id``, or by content when a result has no id), so results the review merely
    inherited are never reported as its own work.
    """
    prior_ids: set[str] = set()
    prior_contents: set[str] = set()
    for message in prior_snapshot:
        if not isinstance(message, Mapping) or message.get("role") != "tool":
            continue
        prior_contents.add(_text(message.get("content")))
        if message.get("tool_call_id"):
            prior_ids.add(str(message["tool_call_id"]))

    names = _tool_names_by_call_id(review_messages)
    actions: list[str] = []
    for message in review_messages:
        if not isinstance(message, Mapping) or message.get("role") != "tool":
            continue
        content = _text(message.get("content"))
        call_id = str(message.get("tool_call_id") or "")
        # A result with an id is judged by its id alone: the review's own "Skill 'x' patched."
        # can read exactly like one in the history and is still new work.
        if call_id in prior_ids if call_id else content in prior_contents:
            continue
        name = names.get(call_id) or str(message.get("name") or "")
        action = _action_for(name, content)
        if action and action not in actions:
            actions.append(action)
    return actions


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    return json.dumps(content, sort_keys=True) if content is not None else ""


def _tool_names_by_call_id(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping) and call.get("id"):
                names[str(call["id"])] = _call_name(call)
    return names


def _action_for(tool_name: str, content: str) -> str | None:
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("success") is not True:
        return None
    message = str(data.get("message") or "").strip()
    if tool_name == MEMORY_TOOL:
        return _TARGET_LABELS.get(str(data.get("target"))) if message in _MEMORY_MESSAGES else None
    if tool_name in SKILL_TOOLS and message.startswith("Skill '"):
        return message.rstrip(".")
    return None


# -- running -------------------------------------------------------------------------------


def run_review(
    snapshot: Sequence[Mapping[str, Any]],
    runtime: Runtime,
    *,
    review_memory: bool = True,
    review_skills: bool = True,
    system_prompt: str | None = None,
    memory_store: MemoryStore | None = None,
    skill_store: SkillStore | None = None,
    parent_tools: ToolRegistry | None = None,
    provenance: Provenance | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    cancel: threading.Event | None = None,
) -> ReviewOutcome:
    """Run one review in the calling thread and return its outcome; endpoint trouble sets ``error``.

    The request carries ``snapshot`` unchanged (its system message verbatim; ``system_prompt``
    is put first when the snapshot has none) followed by the review prompt. A snapshot that
    breaks the tool-call protocol (taken mid-turn, say) is repaired first, since a strict
    endpoint would reject it on every attempt (see :mod:`kindling.review.protocol`). ``parent_tools``
    lets the request advertise the caller's tool list (same prefix), while only the memory and
    skill tools may run. Raises nothing for endpoint or tool failures.
    """
    if not review_memory and not review_skills:
        error = "nothing to review: both memory and skills are off."
        return ReviewOutcome(failure_summary(error), error=error)
    report = ConversionReport()
    history = repair_tool_protocol(snapshot, report)  # a valid snapshot comes back as it was
    for note in report.notes:
        logger.warning("Review snapshot: %s.", note)
    if system_prompt is not None and not (history and history[0].get("role") == "system"):
        history.insert(0, {"role": "system", "content": system_prompt})
    tools = review_tools(
        memory_store,
        skill_store,
        # Hermes Agent stamps its own review's writes the same way.
        provenance=provenance
        or Provenance(write_origin="background_review", execution_context="background_review"),
        memory=review_memory,
        skills=review_skills,
    )
    registry = ToolRegistry.of(parent_tools.tools.values() if parent_tools is not None else ())
    for tool in tools:
        registry.register(tool)
    registry = registry.restricted(names=[t.name for t in tools])
    prompt = review_prompt(memory=review_memory, skills=review_skills)
    result = run(
        [*history, {"role": "user", "content": prompt}],
        runtime=runtime,
        tools=registry,
        max_iterations=max_iterations,
        cancel=cancel,
        stop_on_tool_error=True,
    )
    actions = summarize_actions(result.messages, history)
    denied = [d.name for d in registry.log if d.status == "denied"]
    summary = failure_summary(result.error) if result.error else format_summary(actions)
    return ReviewOutcome(summary, actions, result.error, denied, result.messages, result.cancelled)


class ReviewHandle:
    """A review running in the background: join it, cancel it, or read its outcome."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._outcome: ReviewOutcome | None = None

    @property
    def outcome(self) -> ReviewOutcome | None:
        """The outcome once the review has finished, else None."""
        return self._outcome

    def done(self) -> bool:
        """True once the review has finished (succeeded, failed or been cancelled)."""
        return self._done.is_set()

    def cancel(self) -> None:
        """Ask the review to stop at its next step (a request in flight finishes first)."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        """True when cancel() was called."""
        return self._cancel.is_set()

    def join(self, timeout: float | None = None) -> ReviewOutcome | None:
        """Wait up to ``timeout`` seconds; return the outcome, or None if still running."""
        self._done.wait(timeout)
        return self._outcome

    def _execute(self, work: _Work, callback: Callback | None) -> None:
        try:
            if self._cancel.is_set():
                outcome = ReviewOutcome(
                    failure_summary("cancelled before it started."), error="Run cancelled."
                )
                outcome.cancelled = True
            else:
                outcome = work(self._cancel)
        except Exception as exc:  # the caller's turn must never see a review's failure
            logger.exception("Background review %s crashed.", self.key)
            error = f"{type(exc).__name__}: {exc}"
            outcome = ReviewOutcome(failure_summary(error), error=error)
        self._outcome = outcome
        if outcome.cancelled:
            logger.info("Background review %s was cancelled.", self.key)
        elif outcome.error:
            logger.error("Background review %s failed: %s", self.key, outcome.error)
        else:
            logger.info("Background review %s: %s", self.key, outcome.summary)
        try:
            # A clean review that changed nothing, or one the caller cancelled on purpose, stays
            # out of the user's chat; both are logged above. Failures and changes are announced.
            if callback is not None and not outcome.cancelled and (outcome.error or outcome.actions):
                callback(outcome.summary)
        except Exception:
            logger.exception("The callback of background review %s raised.", self.key)
        finally:
            self._done.set()


class ReviewExecutor:
    """Runs reviews on a small pool of daemon worker threads, one live review per key.

    Submitting only puts the review on a queue: the worker threads are long-lived, so the
    caller's turn never waits for a thread to start (that wait, and the GIL hand-over after
    it, is what made thread-per-review cost about a millisecond). A new worker is started only
    when none is idle and the pool is below ``max_workers``; otherwise reviews wait their turn.

    Submitting under a key whose previous review has not finished cancels the older one: the
    newer snapshot supersedes it, so a busy conversation never runs stale reviews.
    """

    def __init__(self, max_workers: int = 2) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1.")
        self.max_workers = max_workers
        self._lock = threading.Lock()
        self._handles: dict[str, ReviewHandle] = {}
        self._queue: queue.SimpleQueue[tuple[ReviewHandle, _Work, Callback | None]] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._idle = 0

    def submit(self, key: str, work: _Work, callback: Callback | None = None) -> ReviewHandle:
        """Queue ``work(cancel_event)`` for a worker thread and return its handle at once."""
        handle = ReviewHandle(key)
        with self._lock:
            previous = self._handles.get(key)
            if previous is not None and not previous.done():
                previous.cancel()
            self._handles = {k: h for k, h in self._handles.items() if not h.done()}
            self._handles[key] = handle
            start_worker = self._idle == 0 and len(self._workers) < self.max_workers
            if start_worker:
                worker = threading.Thread(
                    target=self._work_loop, name=f"kindling-review-{len(self._workers)}", daemon=True
                )
                self._workers.append(worker)
            else:
                self._idle -= 1  # claimed now, so a second submit does not count the same idle worker
        self._queue.put((handle, work, callback))
        if start_worker:
            worker.start()
        return handle

    def _work_loop(self) -> None:
        while True:
            handle, work, callback = self._queue.get()
            handle._execute(work, callback)
            with self._lock:
                self._idle += 1

    def running(self) -> list[ReviewHandle]:
        """Return the handles of reviews that have not finished (queued or running)."""
        with self._lock:
            return [h for h in self._handles.values() if not h.done()]

    def cancel_all(self) -> None:
        """Ask every queued or running review to stop."""
        for handle in self.running():
            handle.cancel()

    def join_all(self, timeout: float | None = None) -> bool:
        """Wait for every queued or running review; return True when all finished in time."""
        for handle in self.running():
            handle.join(timeout)
        return not self.running()


_default_executor = ReviewExecutor()


def default_executor() -> ReviewExecutor:
    """Return the process-wide executor :func:`spawn_review` uses unless given another."""
    return _default_executor


def spawn_review(
    snapshot: Sequence[Mapping[str, Any]],
    runtime: Runtime,
    *,
    review_memory: bool = True,
    review_skills: bool = True,
    callback: Callback | None = None,
    key: str = "default",
    system_prompt: str | None = None,
    memory_store: MemoryStore | None = None,
    skill_store: SkillStore | None = None,
    parent_tools: ToolRegistry | None = None,
    provenance: Provenance | None = None,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    executor: ReviewExecutor | None = None,
) -> ReviewHandle:
    """Start a review in the background and return its handle at once. Never raises.

    The snapshot list is copied (cheaply) before returning, so the caller may keep appending
    to its conversation. ``callback`` gets ``"Self-improvement review: a · b"`` when something
    changed, or ``"Self-improvement review failed: ..."``; a review that finds nothing to save
    is logged, not announced. A later review under the same ``key`` cancels this one.
    """
    try:
        frozen: list[Mapping[str, Any]] | None = list(snapshot)
        bad_snapshot: Exception | None = None
    except Exception as exc:  # e.g. not iterable: still the caller's turn, so report, don't raise
        frozen, bad_snapshot = None, exc

    def work(cancel: threading.Event) -> ReviewOutcome:
        if frozen is None:
            raise TypeError(f"the snapshot is not a list of messages ({bad_snapshot})")
        return run_review(
            frozen,
            runtime,
            review_memory=review_memory,
            review_skills=review_skills,
            system_prompt=system_prompt,
            memory_store=memory_store,
            skill_store=skill_store,
            parent_tools=parent_tools,
            provenance=provenance,
            max_iterations=max_iterations,
            cancel=cancel,
        )

    return (executor or _default_executor).submit(key, work, callback)
