"""Plan an evaluation: read the sources, split by task, build each fold's template, make the cases.

Nothing is sent here. ``plan_eval`` returns every replay case with its cold conversation and its
warm one (the same conversation with the warm-up the proxy would insert, chosen from a template
built on the other folds only), the tools offered, and the failure classes known on the training
side of each fold. Templates go to a temporary store that is removed when the plan is closed.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kindling.errors import ConfigError, TemplateError
from kindling.eval.replay import (
    Case,
    RecordedCall,
    cases_of,
    has_steps,
    prepare_session,
    recorded_calls,
    succeeded,
)
from kindling.eval.score import FailureIndex
from kindling.eval.split import DEFAULT_FOLDS, DEFAULT_SIMILARITY, Split, split_by_task
from kindling.eval.tools import ToolCatalog
from kindling.eval.warming import LoadedTemplates, warm_block, with_block
from kindling.mining.model import OutcomeStatus
from kindling.sessions.model import ReadReport, Session

__all__ = ["DEFAULT_STEPS", "EvalOptions", "EvalPlan", "PlannedCase", "plan_eval"]

DEFAULT_STEPS = 3
#: Called with a stage ("read", "calls", "templates", "cases") and how far it got (done, total).
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class EvalOptions:
    """How sessions become cases (see ``kindling eval --help`` for each option)."""

    folds: int = DEFAULT_FOLDS
    steps: int = DEFAULT_STEPS
    sessions: int | None = None
    seed: int = 0
    similarity: float = DEFAULT_SIMILARITY
    budget: int | None = None
    min_messages: int | None = None
    keep_personal_data: bool = False
    source_format: str | None = None

    def check(self) -> None:
        """Raise ConfigError for an option out of range."""
        if self.folds < 2:
            raise ConfigError(f"--folds must be 2 or more, not {self.folds}.")
        if self.steps < 1:
            raise ConfigError(f"--steps must be 1 or more, not {self.steps}.")
        if self.sessions is not None and self.sessions < 1:
            raise ConfigError(f"--sessions must be 1 or more, not {self.sessions}.")
        if not 0 < self.similarity <= 1:
            raise ConfigError(f"--similarity must be above 0 and at most 1, not {self.similarity}.")
        if self.budget is not None and self.budget < 0:
            raise ConfigError(f"--budget must be 0 or more, not {self.budget}.")
        if self.min_messages is not None and self.min_messages < 0:
            raise ConfigError(f"--min-messages must be 0 or more, not {self.min_messages}.")


@dataclass
class PlannedCase:
    """A case with its two conversations and the tools both are offered."""

    case: Case
    cold: list[dict[str, Any]]
    warm: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    warmed: bool


@dataclass
class EvalPlan:
    """Every case to replay and what scoring them needs."""

    cases: list[PlannedCase]
    catalogs: list[ToolCatalog]
    failures: dict[int, FailureIndex]
    split: Split
    read: ReadReport
    counts: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    templates: dict[int, str | None] = field(default_factory=dict)
    _store_dir: Path | None = None

    def close(self) -> None:
        """Remove the temporary template store."""
        if self._store_dir is not None:
            shutil.rmtree(self._store_dir, ignore_errors=True)
            self._store_dir = None

    def __enter__(self) -> EvalPlan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read(
    sources: Sequence[str | Path], fmt: str | None, report: ReadReport
) -> tuple[list[Session], list[int]]:
    from kindling.sessions import iter_sessions

    # Every source is opened before any is read: a bad path fails at once.
    streams = [iter_sessions(source, fmt, report=report) for source in sources]
    sessions: list[Session] = []
    origin: list[int] = []
    for number, stream in enumerate(streams):
        for session in stream:
            sessions.append(session)
            origin.append(number)
    return sessions, origin


def _catalog(sessions: Sequence[Session], calls: Sequence[Sequence[RecordedCall]]) -> ToolCatalog:
    worked: dict[str, list[dict[str, Any]]] = defaultdict(list)
    called: set[str] = set()
    definitions: list[dict[str, Any]] = []
    for session, recorded in zip(sessions, calls, strict=True):
        for call in recorded:
            called.add(call.name)
            if call.status is OutcomeStatus.OK and isinstance(call.arguments, dict):
                worked[call.name].append(call.arguments)
        tools = session.metadata.get("tools")
        if isinstance(tools, list):
            definitions.extend(t for t in tools if isinstance(t, dict))
    return ToolCatalog.infer(worked, called, definitions)


def _build_store(
    root: Path, fold: int, training: list[Session], options: EvalOptions
) -> tuple[Any, str | None]:
    from kindling.templates.build import template_from_sessions
    from kindling.templates.store import JsonDirStore

    store = JsonDirStore(root / f"fold-{fold}")
    filters: dict[str, Any] = {}
    if options.min_messages is not None:
        filters["min_messages"] = options.min_messages
    name = f"eval-fold-{fold}"
    try:
        template = template_from_sessions(name, training, **filters)
    except TemplateError:
        return store, None  # nothing on this side worked: its sessions are replayed unwarmed
    store.save(template)
    return LoadedTemplates(store), name


def plan_eval(
    sources: Sequence[str | Path], options: EvalOptions, *, on_progress: Progress | None = None
) -> EvalPlan:
    """Read ``sources``, split them by task and return the plan of every case to replay.

    Raises ConfigError for bad options or a bad ``mining.json``, SourceError when a source cannot
    be read, and ConfigError when the sources give no case to replay.
    """
    from kindling.mining.config import load_mining_config
    from kindling.mining.outcome import default_classifier
    from kindling.mining.patterns import personal_data_scrubber
    from kindling.mining.redact import SecretRedactor

    def progress(stage: str, done: int, total: int) -> None:
        if on_progress is not None:
            on_progress(stage, done, total)

    options.check()
    if not sources:
        raise ConfigError("kindling eval needs at least one session source.")
    report = ReadReport()
    sessions, origin = _read(sources, options.source_format, report)
    progress("read", len(sessions), len(sessions))
    config = load_mining_config()
    classifier = default_classifier()
    patterns = config.secrets()
    redactor = SecretRedactor(patterns) if patterns else None
    scrubber = personal_data_scrubber(config, keep_personal_data=options.keep_personal_data)
    calls: list[list[RecordedCall]] = []
    for done, session in enumerate(sessions, start=1):
        calls.append(recorded_calls(session, classifier, redactor=redactor, scrubber=scrubber))
        progress("calls", done, len(sessions))
    split = split_by_task(sessions, folds=options.folds, seed=options.seed, threshold=options.similarity)
    catalogs = [
        _catalog(
            [s for s, o in zip(sessions, origin, strict=True) if o == n],
            [c for c, o in zip(calls, origin, strict=True) if o == n],
        )
        for n in range(len(sources))
    ]
    candidates = [i for i, session in enumerate(sessions) if has_steps(session, calls[i])]
    if not candidates:
        raise ConfigError(
            f"No step to replay in {len(sessions)} sessions: none has an agent tool call with a result "
            "(in a session that succeeded, for calls that worked; in any, for calls that failed)."
        )
    chosen = candidates
    if options.sessions is not None and options.sessions < len(candidates):
        chosen = sorted(random.Random(options.seed).sample(candidates, options.sessions))

    folds = sorted({split.fold[i] for i in chosen})
    root = Path(tempfile.mkdtemp(prefix="kindling-eval-"))
    plan = EvalPlan([], catalogs, {}, split, report, _store_dir=root)
    dropped: Counter[str] = Counter()
    warmed = 0
    try:
        stores: dict[int, Any] = {}
        for done, fold in enumerate(folds, start=1):
            training = split.training(fold)
            stores[fold], plan.templates[fold] = _build_store(
                root, fold, [sessions[i] for i in training], options
            )
            plan.failures[fold] = FailureIndex.from_calls(c for i in training for c in calls[i])
            progress("templates", done, len(folds))
        for done, position in enumerate(chosen, start=1):
            item = prepare_session(sessions[position], classifier, redactor=redactor, scrubber=scrubber)
            dropped.update(item.dropped)
            catalog = catalogs[origin[position]]
            fold = split.fold[position]
            cases = cases_of(
                item,
                source=origin[position],
                fold=fold,
                group=split.group[position],
                steps=options.steps,
                skipped=plan.skipped,
            )
            block = None
            if cases and plan.templates[fold] is not None:
                block = warm_block(item.messages, catalog.names, store=stores[fold], budget=options.budget)
            warmed += block is not None
            tools = catalog.definitions()
            for case in cases:
                plan.cases.append(
                    PlannedCase(
                        case, case.messages, with_block(case.messages, block), tools, block is not None
                    )
                )
            progress("cases", done, len(chosen))
    except BaseException:
        plan.close()
        raise
    plan.counts = {
        "sessions_read": len(sessions),
        "sessions_with_steps": len(candidates),
        "held_out_sessions": len(chosen),
        "held_out_succeeded": sum(1 for i in chosen if succeeded(sessions[i])),
        "held_out_warmed": warmed,
        "tasks": split.tasks,
        "folds": options.folds,
        "folds_used": len(folds),
        "messages_left_out": dict(sorted(dropped.items())),
    }
    return plan
