"""Build a template from past sessions: read the sources, mine examples and episodes, classify, save.

A template keeps the successful past tasks as episodes (the opening request and the calls that
worked, in order) and examples with coverage per tool (every tool that worked keeps examples).
Rebuilding an existing name keeps its type, tags, description and system prompt unless new ones
are given, and a rebuild that changes nothing makes no new version.

Every example and episode keeps its provenance: the source and session it came from, and, from a
store kindling's proxy recorded, the tenant and whether its calls were ones the proxy relayed
(``verified``). A proxy store holding several tenants is built one tenant at a time (``tenant``)
unless all of them are asked for (``all_tenants``); the template then belongs to that tenant. A
rebuild that changes what a shared template holds saves it unshared, for an admin to review.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kindling.errors import NotFoundError, TemplateError
from kindling.mining.model import Example, Lesson, LessonPair
from kindling.mining.patterns import DEFAULT_MIN_MESSAGES
from kindling.sessions.model import ReadReport, Session
from kindling.templates.episodes import DEFAULT_PER_TOOL, EpisodeCollector, cover_tools, link_copies
from kindling.templates.model import Episode, Template, check_task_type, content_key, validate_name
from kindling.templates.store import TemplateStore, open_store

__all__ = [
    "CHAT_MIN_MESSAGES",
    "BuildResult",
    "build_template",
    "build_template_with_report",
    "mine_template_parts",
    "template_from_sessions",
]

# Mining keeps every distinct call; coverage then chooses per tool.
_ALL = 10**9
#: The shortest session mined from a store of kindling's proxy by default: a chat's request, one
#: call and its result (agent sessions elsewhere are mined from 20 messages up).
CHAT_MIN_MESSAGES = 3


class BuildResult:
    """A built template with what the read and the mining saw (for the CLI and the agent tool).

    ``unchanged`` is True when the sources gave exactly the stored template, so no version was made.
    """

    def __init__(
        self,
        template: Template,
        report: ReadReport,
        mining: Any,
        *,
        unchanged: bool = False,
        unshared: bool = False,
    ) -> None:
        self.template = template
        self.report = report
        self.mining = mining
        self.unchanged = unchanged
        #: True when the previous version was shared and this one, holding something new, is not.
        self.unshared = unshared

    def as_dict(self) -> dict[str, Any]:
        """Return the template summary, the read report and the mining counts as JSON-ready data."""
        return {
            "template": self.template.summary(),
            "unchanged": self.unchanged,
            "unshared": self.unshared,
            "read": self.report.as_dict(),
            "mining": {
                "sessions_mined": self.mining.sessions_mined,
                "distinct_examples": self.mining.distinct,
                "episodes": len(self.template.episodes),
                "filtered": dict(sorted(self.mining.filtered.items())),
            },
        }


def _iter_all(
    sources: Sequence[str | Path],
    fmt: str | None,
    report: ReadReport,
    on_session: Callable[[Session], None] | None,
    on_progress: Callable[[int], None] | None,
    recorded: _Recorded | None = None,
) -> Iterator[Session]:
    from kindling.sessions import iter_sessions

    # Open every source before reading any, so a bad path fails at once, not after minutes.
    streams = [
        recorded.read(source, report)
        if recorded is not None and source in recorded.stores
        else iter_sessions(source, fmt, report=report)
        for source in sources
    ]
    for stream in streams:
        for session in stream:
            if on_session is not None:
                on_session(session)
            if on_progress is not None:
                on_progress(1)
            yield session


class _Recorded:
    """The sources that are stores of kindling's proxy, their tenants, and how to read them."""

    def __init__(self, sources: Sequence[str | Path], fmt: str | None) -> None:
        from kindling.sessions.recorded import recorded_tenants
        from kindling.sessions.sources import PROXY, detect_format, resolve_source

        self.stores: dict[str | Path, str | Path] = {}
        self.tenants: dict[str, int] = {}
        self.tenant: str | None = None
        self.trust = False
        #: Session id -> (tenant, verified), for the provenance of what is mined from them.
        self.provenance: dict[str, tuple[str | None, bool | None]] = {}
        if fmt not in (None, PROXY):
            return
        for source in sources:
            resolved = resolve_source(source)
            if (fmt or detect_format(resolved)) == PROXY:
                self.stores[source] = resolved
                for tenant, count in recorded_tenants(resolved).items():
                    self.tenants[tenant] = self.tenants.get(tenant, 0) + count

    def read(self, source: str | Path, report: ReadReport) -> Iterator[Session]:
        from kindling.sessions.recorded import read_recorded

        sessions = read_recorded(
            self.stores[source], report, tenant=self.tenant, trust_client_history=self.trust
        )
        return self._noted(sessions)

    def _noted(self, sessions: Iterator[Session]) -> Iterator[Session]:
        for session in sessions:
            verified = session.metadata.get("verified")
            self.provenance[session.id] = (
                session.metadata.get("tenant"),
                verified if isinstance(verified, bool) else None,
            )
            yield session

    def stamp(
        self, examples: Iterable[Example], episodes: Iterable[Episode], lessons: Iterable[Lesson] = ()
    ) -> None:
        """Give what was mined from a recorded session its tenant and whether it was verified."""
        pairs = [pair for lesson in lessons for pair in lesson.pairs]
        items: list[Example | Episode | LessonPair] = [*examples, *episodes, *pairs]
        for item in items:
            found = self.provenance.get(item.session_id)
            if found is not None:
                item.tenant, item.verified = found


def _check_tenants(name: str, recorded: _Recorded, tenant: str | None, all_tenants: bool) -> str | None:
    """The tenant the template belongs to; TemplateError when the sources mix tenants unasked."""
    if tenant is not None:
        return validate_name(tenant, kind="tenant")
    if all_tenants or not recorded.tenants:
        return None
    if len(recorded.tenants) > 1:
        names = ", ".join(f"{t} ({n})" for t, n in sorted(recorded.tenants.items()))
        raise TemplateError(
            f"Cannot build template {name!r}: the proxy store holds the sessions of {len(recorded.tenants)} "
            f"tenants ({names}); build one tenant's with --tenant NAME, or all of them with --all-tenants.",
            template=name,
        )
    (only,) = recorded.tenants
    return only


def _current(store: TemplateStore, name: str) -> Template | None:
    try:
        return store.get(name)
    except NotFoundError:
        return None
    except TemplateError:
        return None  # a corrupt current file: the store keeps a copy when it is replaced


def mine_template_parts(
    sessions: Iterable[Session],
    *,
    report: ReadReport | None = None,
    per_tool: int = DEFAULT_PER_TOOL,
    max_examples: int | None = None,
    **mining_filters: Any,
) -> tuple[list[Example], list[Episode], Any]:
    """Return (examples with per-tool coverage, episodes, the mining result) for ``sessions``.

    One pass: mining keeps every distinct call that worked, the episodes and the lessons (in the
    result's ``lessons``) are collected beside it,
    then coverage keeps up to ``per_tool`` examples per tool (and at most ``max_examples``, tools
    taking turns). Pure apart from reading ``mining.json``. Raises ValueError or TypeError for bad
    filters, ConfigError for a bad ``mining.json``.
    """
    from kindling.mining import mine

    collector = _collector(mining_filters)

    def tee(stream: Iterable[Session]) -> Iterator[Session]:
        for session in stream:
            collector(session)
            yield session

    result = mine(tee(sessions), report=report, max_examples=_ALL, **mining_filters)
    collector.drop_sessions(result.injected)
    if collector.injected:
        result.filtered["prompt_injection_episodes"] += collector.injected
    examples = _cover(result, per_tool, max_examples)
    link_copies(collector.episodes, examples, collector.call_keys)
    _keep_lessons(result, collector)
    return examples, collector.episodes, result


def _collector(mining_filters: dict[str, Any]) -> EpisodeCollector:
    return EpisodeCollector(
        min_messages=mining_filters.get("min_messages", 20),
        source_filter=mining_filters.get("source_filter"),
        skip_zero_reward=mining_filters.get("skip_zero_reward", True),
        skip_tools=mining_filters.get("skip_tools"),
        keep_personal_data=bool(mining_filters.get("keep_personal_data", False)),
    )


def _cover(result: Any, per_tool: int, max_examples: int | None) -> list[Example]:
    examples, left_out = cover_tools(result.examples, per_tool=per_tool, max_examples=max_examples)
    if left_out:
        result.filtered["beyond_coverage"] += left_out
    return examples


def _episodes_of(
    sources: Sequence[str | Path],
    fmt: str | None,
    mining_filters: dict[str, Any],
    examples: Sequence[Example],
    result: Any,
) -> list[Episode]:
    """Collect the episodes in a pass of their own (when mining ran in worker processes), their
    steps linked to the kept ``examples`` that show their calls (``link_copies``); episodes left
    out for prompt injection (``result.injected``, or their own request) are counted in
    ``result.filtered``."""
    collector = _collector(mining_filters)
    limit = mining_filters.get("max_sessions")
    for session in _iter_all(sources, fmt, ReadReport(), None, None):
        if limit is not None and len(collector.episodes) >= limit:
            break
        collector(session)
    collector.drop_sessions(result.injected)
    link_copies(collector.episodes, examples, collector.call_keys)
    if collector.injected:
        result.filtered["prompt_injection_episodes"] += collector.injected
    _keep_lessons(result, collector)
    return collector.episodes


def _keep_lessons(result: Any, collector: EpisodeCollector) -> None:
    """Put the collector's lessons in the mining result, and count the sessions whose failures were left out."""
    result.lessons = collector.lessons.lessons()
    for reason, count in collector.lessons.counts().items():
        if count:
            result.filtered[reason] += count


def template_from_sessions(
    name: str, sessions: Iterable[Session], *, per_tool: int = DEFAULT_PER_TOOL, **options: Any
) -> Template:
    """Return a template mined from ``sessions`` in memory (nothing stored; for tests and benchmarks).

    ``options`` are ``mine_template_parts``'s filters plus ``description``, ``task_type``, ``tags``.
    Raises TemplateError when nothing can be mined.
    """
    fields = {k: options.pop(k) for k in ("description", "task_type", "tags") if k in options}
    examples, episodes, result = mine_template_parts(sessions, per_tool=per_tool, **options)
    if not examples:
        raise TemplateError(f"No examples to keep for template {name!r}.", template=name)
    return Template(name=name, examples=examples, episodes=episodes, lessons=result.lessons, **fields)


def build_template_with_report(
    name: str,
    sources: Sequence[str | Path],
    *,
    store: TemplateStore | None = None,
    description: str | None = None,
    task_type: str | None = None,
    tags: Sequence[str] | None = None,
    system_prompt_addendum: str | None = None,
    format: str | None = None,
    on_session: Callable[[Session], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    workers: int | None = None,
    per_tool: int = DEFAULT_PER_TOOL,
    tenant: str | None = None,
    all_tenants: bool = False,
    trust_client_history: bool = False,
    **mining_filters: Any,
) -> BuildResult:
    """Like ``build_template`` but also return the read report and the mining counts.

    From a store kindling's proxy recorded: ``tenant`` mines that tenant's sessions only (and the
    template is that tenant's); a store holding several tenants needs ``tenant`` or
    ``all_tenants`` (TemplateError otherwise). ``trust_client_history`` mines the assistant turns
    the proxy never relayed too (a store imported from elsewhere); what they give is marked
    unverified. ``min_messages`` defaults to 3 when every source is a proxy store, else 20.

    ``on_progress`` is called with the number of sessions read since its last call (for progress
    bars). ``on_session`` is called with every session read; it needs every session in this
    process, so it mines in one process (one pass that also collects the episodes). Otherwise a
    big Hermes database is mined in ``workers`` processes (None: automatic; see
    ``kindling.mining.mine_sources``) with the same result, and the episodes are collected in a
    second, sequential pass.
    """
    from kindling.mining import classify_calls, mine_sources

    validate_name(name)
    # Options are checked before the sources are read: a typo should not cost a mining run.
    task_type = check_task_type(task_type, template=name)
    if not sources:
        raise TemplateError(f"Template {name!r} needs at least one session source.", template=name)
    if per_tool < 1:
        raise TemplateError(f"per_tool must be 1 or more, not {per_tool}.", template=name)
    target = store or open_store()  # a store that cannot open fails now, not after the mining
    max_examples = mining_filters.pop("max_examples", None)
    if max_examples is not None and max_examples < 0:
        raise TemplateError(f"Cannot build template {name!r}: max_examples must be 0 or more.", template=name)
    recorded = _Recorded(sources, format)
    owner = _check_tenants(name, recorded, tenant, all_tenants)
    recorded.tenant = tenant
    recorded.trust = trust_client_history
    if mining_filters.get("min_messages") is None:
        all_recorded = len(recorded.stores) == len(sources)
        mining_filters["min_messages"] = CHAT_MIN_MESSAGES if all_recorded else DEFAULT_MIN_MESSAGES
    report = ReadReport()
    try:
        if on_session is not None or recorded.stores:
            # Every session must pass through this process: mine and collect in one pass.
            examples, episodes, result = mine_template_parts(
                _iter_all(sources, format, report, on_session, on_progress, recorded),
                report=report,
                per_tool=per_tool,
                max_examples=max_examples,
                **mining_filters,
            )
            recorded.stamp(examples, episodes, result.lessons)
        else:
            # A big Hermes database is mined in worker processes; the episodes (a request and a
            # list of tool names per session) are collected in a light pass of their own.
            result = mine_sources(
                sources,
                format=format,
                workers=workers,
                report=report,
                on_progress=on_progress,
                max_examples=_ALL,
                **mining_filters,
            )
            examples = _cover(result, per_tool, max_examples)
            episodes = _episodes_of(sources, format, mining_filters, examples, result)
    except (ValueError, TypeError) as exc:
        # Bad filter values (negative limits, unknown filter names) are the caller's input.
        raise TemplateError(f"Cannot build template {name!r}: {exc}.", template=name) from exc
    if not examples:
        skipped = ", ".join(f"{k}={v}" for k, v in sorted(report.skipped.items())) or "none"
        filtered = ", ".join(f"{k}={v}" for k, v in sorted(result.filtered.items()) if v) or "none"
        hint = (
            "no session had a tool call that worked"
            if result.sessions_mined
            else "try a lower --min-messages"
        )
        raise TemplateError(
            f"No examples to keep for template {name!r}: read {report.sessions} sessions, mined "
            f"{result.sessions_mined} (skipped: {skipped}; left out: {filtered}); {hint}.",
            template=name,
        )
    previous = _current(target, name)
    if task_type is None and previous is not None:
        task_type = previous.task_type
    if task_type is None:
        # Weight each tool by how often it was really called, not once per unique example.
        names = [e.tool_name for e in examples for _ in range(max(1, e.count))]
        task_type = classify_calls(names).value
    if description is None:
        description = (
            previous.description
            if previous is not None
            else f"{len(examples)} examples and {len(episodes)} past tasks "
            f"mined from {report.sessions} sessions"
        )
    if tags is None:
        tags = previous.tags if previous is not None else ()
    if system_prompt_addendum is None:
        system_prompt_addendum = previous.system_prompt_addendum if previous is not None else ""
    session_ids = list(dict.fromkeys(e.session_id for e in examples if e.session_id))
    template = Template(
        name=name,
        description=description,
        task_type=str(getattr(task_type, "value", task_type)),
        tags=list(tags),
        examples=examples,
        episodes=episodes,
        lessons=result.lessons,
        system_prompt_addendum=system_prompt_addendum,
        source_session_ids=session_ids,
        tenant=owner,
        shared=previous.shared if previous is not None else False,
    )
    if previous is not None and content_key(previous) == content_key(template):
        return BuildResult(previous, report, result, unchanged=True)
    # What an admin shared was what they saw: anything new waits for them to share it again.
    stored = target.save(template.model_copy(update={"shared": False}))
    return BuildResult(stored, report, result, unshared=previous is not None and previous.shared)


def build_template(
    name: str,
    sources: Sequence[str | Path],
    *,
    store: TemplateStore | None = None,
    description: str | None = None,
    task_type: str | None = None,
    tags: Sequence[str] | None = None,
    **mining_filters: Any,
) -> Template:
    """Mine ``sources`` (paths or URLs any session reader accepts) into a template and save it.

    ``mining_filters`` go to ``kindling.mining.mine`` (min_messages, max_sessions, source_filter,
    skip_tools, result_chars, keep_personal_data: by default ids, names, e-mails and addresses in
    the examples and episodes become typed placeholders, true keeps them); ``max_examples`` caps the examples kept (tools take turns, so
    each keeps one before any keeps two) and ``per_tool`` (default 20) caps each tool's. Options
    left None keep the stored template's (a rebuild keeps type, tags, description); for a new name,
    ``task_type`` defaults to the type of the mined calls. A rebuild that changes nothing returns
    the stored template without a new version. Raises TemplateError when nothing can be mined or
    ``task_type`` is unknown, SourceError when a source cannot be read, InvalidNameError for a bad name.
    """
    return build_template_with_report(
        name, sources, store=store, description=description, task_type=task_type, tags=tags, **mining_filters
    ).template
