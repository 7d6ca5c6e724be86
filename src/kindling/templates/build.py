"""Build a template from past sessions: read the sources, mine examples, classify, save."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kindling.errors import TemplateError
from kindling.sessions.model import ReadReport, Session
from kindling.templates.model import Template, check_task_type, validate_name
from kindling.templates.store import TemplateStore, open_store

__all__ = ["BuildResult", "build_template", "build_template_with_report"]


class BuildResult:
    """A built template with what the read and the mining saw (for the CLI and the agent tool)."""

    def __init__(self, template: Template, report: ReadReport, mining: Any) -> None:
        self.template = template
        self.report = report
        self.mining = mining

    def as_dict(self) -> dict[str, Any]:
        """Return the template summary, the read report and the mining counts as JSON-ready data."""
        return {
            "template": self.template.summary(),
            "read": self.report.as_dict(),
            "mining": {
                "sessions_mined": self.mining.sessions_mined,
                "distinct_examples": self.mining.distinct,
                "filtered": dict(sorted(self.mining.filtered.items())),
            },
        }


def _iter_all(
    sources: Sequence[str | Path],
    fmt: str | None,
    report: ReadReport,
    on_session: Callable[[Session], None] | None,
) -> Iterator[Session]:
    from kindling.sessions import iter_sessions

    # Open every source before reading any, so a bad path fails at once, not after minutes.
    streams = [iter_sessions(source, fmt, report=report) for source in sources]
    for stream in streams:
        for session in stream:
            if on_session is not None:
                on_session(session)
            yield session


def build_template_with_report(
    name: str,
    sources: Sequence[str | Path],
    *,
    store: TemplateStore | None = None,
    description: str = "",
    task_type: str | None = None,
    tags: Sequence[str] = (),
    system_prompt_addendum: str = "",
    format: str | None = None,
    on_session: Callable[[Session], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
    workers: int | None = None,
    **mining_filters: Any,
) -> BuildResult:
    """Like ``build_template`` but also return the read report and the mining counts.

    ``on_progress`` is called with the number of sessions read since its last call (for progress
    bars). ``on_session`` is called with every session read; it needs every session in this
    process, so it mines in one process. Otherwise a big Hermes database is mined in ``workers``
    processes (None: automatic; see ``kindling.mining.mine_sources``), with the same result.
    """
    from kindling.mining import classify_calls, mine, mine_sources

    validate_name(name)
    # Options are checked before the sources are read: a typo should not cost a mining run.
    task_type = check_task_type(task_type, template=name)
    if not sources:
        raise TemplateError(f"Template {name!r} needs at least one session source.", template=name)
    target = store or open_store()  # a store that cannot open fails now, not after the mining
    report = ReadReport()
    try:
        if on_session is not None:
            result = mine(_iter_all(sources, format, report, on_session), report=report, **mining_filters)
        else:
            result = mine_sources(
                sources,
                format=format,
                workers=workers,
                report=report,
                on_progress=on_progress,
                **mining_filters,
            )
    except (ValueError, TypeError) as exc:
        # Bad filter values (negative limits, unknown filter names) are the caller's input.
        raise TemplateError(f"Cannot build template {name!r}: {exc}.", template=name) from exc
    examples = list(result.examples)
    if not examples:
        skipped = ", ".join(f"{k}={v}" for k, v in sorted(report.skipped.items())) or "none"
        raise TemplateError(
            f"No examples to keep for template {name!r}: read {report.sessions} sessions "
            f"(skipped: {skipped}); try a lower --min-messages.",
            template=name,
        )
    if task_type is None:
        # Weight each tool by how often it was really called, not once per unique example.
        names = [e.tool_name for e in examples for _ in range(max(1, e.count))]
        task_type = classify_calls(names).value
    session_ids = list(dict.fromkeys(e.session_id for e in examples if e.session_id))
    template = Template(
        name=name,
        description=description or f"{len(examples)} examples mined from {report.sessions} sessions",
        task_type=str(getattr(task_type, "value", task_type)),
        tags=list(tags),
        examples=examples,
        system_prompt_addendum=system_prompt_addendum,
        source_session_ids=session_ids,
    )
    stored = target.save(template)
    return BuildResult(stored, report, result)


def build_template(
    name: str,
    sources: Sequence[str | Path],
    *,
    store: TemplateStore | None = None,
    description: str = "",
    task_type: str | None = None,
    tags: Sequence[str] = (),
    **mining_filters: Any,
) -> Template:
    """Mine ``sources`` (paths or URLs any session reader accepts) into a template and save it.

    ``mining_filters`` go to ``kindling.mining.mine`` (min_messages, max_sessions, source_filter,
    skip_tools, max_examples, result_chars, keep_personal_data: by default ids, names, e-mails and
    addresses in the examples become typed placeholders, true keeps them); ``workers=N`` sets how many processes mine a Hermes
    database (default: automatic). ``task_type`` defaults to the type of the mined calls.
    Returns the stored template (version bumped if the name existed). Raises TemplateError when
    nothing can be mined or ``task_type`` is unknown, SourceError when a source cannot be read, InvalidNameError for a bad name.
    """
    return build_template_with_report(
        name, sources, store=store, description=description, task_type=task_type, tags=tags, **mining_filters
    ).template
