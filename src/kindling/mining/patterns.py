"""Turn sessions into the examples worth keeping, and count what was seen on the way.

``mine`` is pure: it takes an iterable of sessions (from any reader) and does no I/O of its own
beyond reading the optional ``mining.json``. It walks each session once, pairs every call the agent
made with its result by ``tool_call_id`` (parallel calls answer in any order), decides each
outcome, and keeps only calls that worked, from sessions that pass the filters, de-duplicated by
tool and canonical arguments. Memory grows with the number of distinct (tool, arguments) pairs,
never with the number of sessions read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from kindling.injection import instruction_in
from kindling.mining.config import MiningConfig, load_mining_config
from kindling.mining.hermes_rows import assemble_and_mine
from kindling.mining.model import Example, Lesson, OutcomeStatus
from kindling.mining.passes import MiningPass, PartialMining, canonical_key, mine_rows
from kindling.mining.personal import PersonalDataScrubber
from kindling.mining.redact import SecretRedactor
from kindling.mining.stats import COHORTS, MiningStats
from kindling.sessions.model import ReadReport, Session, SessionStream, ToolCall, session_rows

DEFAULT_MIN_MESSAGES = 20
DEFAULT_MAX_EXAMPLES = 100
DEFAULT_RESULT_CHARS = 2000
DEFAULT_CONTEXT_CHARS = 1000


def canonical_arguments(call: ToolCall) -> bytes:
    """Return the key two calls share when their arguments are the same up to key order and spacing.

    Parsed arguments become JSON with sorted keys; raw (non-JSON) arguments keep their text with
    runs of whitespace collapsed, prefixed so they never collide with a JSON form.
    """
    return canonical_key(call.arguments, call.raw_arguments)


@dataclass
class MiningResult:
    """What ``mine`` returns: the examples (ranked, capped), the stats, and why things were left out.

    ``filtered`` counts sessions and calls kept out of the examples by a filter, by reason
    (``too_short``, ``source_filtered``, ``errored_session``, ``zero_reward``, ``trivial_tool``,
    ``outcome_failed``, ``outcome_unknown``, ``prompt_injection``: the request, arguments or result
    gives the agent instructions (``kindling.injection``), ``after_prompt_injection``: a later call
    of a session with such a call, ``beyond_max_examples``). ``injected`` maps each session found
    giving such instructions to the position of its first such call (among the calls ranked before
    the cap was reached). ``distinct`` is how many
    distinct (tool, arguments) pairs worked before the cap; ``sessions_mined`` how many sessions
    passed the filters. ``lessons`` are the failed calls with what worked next, grouped by tool
    and error class, when a template build collected them (``kindling.mining.lessons``).
    """

    examples: list[Example]
    stats: MiningStats
    filtered: Counter[str] = field(default_factory=Counter)
    sessions_mined: int = 0
    distinct: int = 0
    injected: dict[str, int] = field(default_factory=dict)
    lessons: list[Lesson] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Return the stats plus the mining counts and the examples, JSON-ready."""
        return {
            **self.stats.as_dict(),
            "sessions_mined": self.sessions_mined,
            "distinct_examples": self.distinct,
            "filtered": dict(sorted(self.filtered.items())),
            "examples": [example.model_dump(mode="json") for example in self.examples],
        }


def mine(
    sessions: Iterable[Session],
    *,
    min_messages: int = DEFAULT_MIN_MESSAGES,
    max_sessions: int | None = None,
    source_filter: str | Collection[str] | None = None,
    skip_end_reasons: Collection[str] | None = None,
    skip_zero_reward: bool = True,
    skip_tools: Collection[str] | None = None,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    result_chars: int = DEFAULT_RESULT_CHARS,
    context_chars: int = DEFAULT_CONTEXT_CHARS,
    report: ReadReport | None = None,
    config: MiningConfig | None = None,
    keep_personal_data: bool = False,
) -> MiningResult:
    """Return the examples worth keeping from ``sessions`` and the stats of everything read.

    Filters (examples only; the stats cover every session read): sessions with fewer than
    ``min_messages`` messages, whose ``source`` matches none of ``source_filter`` (shell globs),
    whose end reason is in ``skip_end_reasons`` (default: errored ones, plus ``mining.json``), or
    with a reward of 0 or less where a reward exists (``skip_zero_reward``) are not mined; calls to
    ``skip_tools`` (default: the trivial tools) and calls whose outcome is not ok are not kept.
    ``max_sessions`` stops reading after that many sessions were mined. Examples are ranked by
    count then recency and capped at ``max_examples`` (0 = stats only); results are truncated to
    ``result_chars`` and requests to ``context_chars`` with a visible marker. ``report`` is the
    reader's report: its skipped counts join the stats'. Kept examples have credentials hidden and
    personal data replaced by typed placeholders (see ``finish``); ``keep_personal_data`` keeps
    the personal data. Raises ConfigError on a bad ``mining.json`` and ValueError on a negative limit.
    """
    check_limits(min_messages, max_sessions, max_examples, result_chars, context_chars)
    partial = mine_partial(
        sessions,
        min_messages=min_messages,
        max_sessions=max_sessions,
        source_filter=source_filter,
        skip_end_reasons=skip_end_reasons,
        skip_zero_reward=skip_zero_reward,
        skip_tools=skip_tools,
        keep_examples=max_examples > 0,
        result_chars=result_chars,
        context_chars=context_chars,
        config=config,
    )
    return finish(
        partial,
        max_examples=max_examples,
        report=report,
        config=config,
        keep_personal_data=keep_personal_data,
    )


def compute_stats(sessions: Iterable[Session], *, report: ReadReport | None = None) -> MiningStats:
    """Return the stats of ``sessions`` without mining examples (a thin wrapper over ``mine``).

    Raises ConfigError when the user's mining config is invalid.
    """
    return mine(sessions, max_examples=0, report=report).stats


def check_limits(
    min_messages: int,
    max_sessions: int | None,
    max_examples: int,
    result_chars: int,
    context_chars: int,
) -> None:
    """Raise ValueError when a mining limit is out of range (what ``mine`` checks first)."""
    for name, value in (("min_messages", min_messages), ("max_examples", max_examples)):
        if value < 0:
            raise ValueError(f"{name} must be 0 or more, not {value}")
    if max_sessions is not None and max_sessions < 0:
        raise ValueError(f"max_sessions must be 0 or more, not {max_sessions}")
    if result_chars < 1 or context_chars < 1:
        raise ValueError("result_chars and context_chars must be at least 1")


def mine_partial(
    sessions: Iterable[Session],
    *,
    min_messages: int = DEFAULT_MIN_MESSAGES,
    max_sessions: int | None = None,
    source_filter: str | Collection[str] | None = None,
    skip_end_reasons: Collection[str] | None = None,
    skip_zero_reward: bool = True,
    skip_tools: Collection[str] | None = None,
    keep_examples: bool = True,
    result_chars: int = DEFAULT_RESULT_CHARS,
    context_chars: int = DEFAULT_CONTEXT_CHARS,
    config: MiningConfig | None = None,
) -> PartialMining:
    """Return one pass over ``sessions`` before ranking and capping (``mine`` minus ``finish``).

    Parallel mining runs this on each shard and merges the parts with ``merge_partials``. Limits
    are not checked here (``check_limits``). Raises ConfigError on a bad ``mining.json``.
    """
    config = config if config is not None else load_mining_config()
    run = MiningPass(
        config,
        min_messages=min_messages,
        max_sessions=max_sessions,
        source_filter=source_filter,
        skip_end_reasons=skip_end_reasons,
        skip_zero_reward=skip_zero_reward,
        skip_tools=skip_tools,
        keep_examples=keep_examples,
        result_chars=result_chars,
        context_chars=context_chars,
    )
    if max_sessions == 0:
        sessions = ()  # read nothing at all, not even one session
    # A Hermes database is mined inside its reader's loop (kindling.mining.hermes_rows); other
    # sessions in row form: a reader that holds its messages as tuples hands them over without
    # building a Message per row (kindling.sessions.model.SessionStream), others are converted.
    fused = sessions.assembled(assemble_and_mine(run)) if isinstance(sessions, SessionStream) else None
    if fused is not None:
        for stop in fused:
            if stop:
                break
    else:
        mine_rows(run, session_rows(sessions))
    return run.partial()


def finish(
    partial: PartialMining,
    *,
    max_examples: int,
    report: ReadReport | None = None,
    config: MiningConfig | None = None,
    keep_personal_data: bool = False,
) -> MiningResult:
    """Return the ``MiningResult`` of a (merged) partial pass: totals, ranking, the cap.

    ``report``'s skipped counts join the stats'. Credentials in the kept examples are hidden with
    ``config``'s secret patterns (default: the effective ``mining.json``), then personal data is
    replaced by typed placeholders, consistently within each example (``kindling.mining.personal``),
    unless ``keep_personal_data`` or the config's ``scrub_personal_data`` is false. A call whose
    request, arguments or result gives the agent instructions (``kindling.injection``) is dropped
    and counted as ``prompt_injection``, with every later call of its session
    (``after_prompt_injection``), their places taken by the next in rank. Only the kept
    examples are touched, after ranking. ``partial`` is consumed. Raises ConfigError on a bad
    ``mining.json``.
    """
    config = config if config is not None else load_mining_config()
    patterns = config.secrets()
    redactor = SecretRedactor(patterns) if patterns else None
    scrubber = personal_data_scrubber(config, keep_personal_data=keep_personal_data)
    stats = partial.stats
    filtered = partial.filtered
    kept = partial.kept
    for counts in stats.tally.values():
        stats.tool_calls += counts[0]
        stats.results_paired += counts[1]
        stats.results_failed += counts[2]
        stats.results_unknown += counts[3]
    if report is not None:
        stats.merge_report(report)
    ranked = sorted(
        kept.items(),
        key=lambda kv: (-kv[1][0], -(kv[1][1] if kv[1][1] is not None else float("-inf")), -kv[1][2]),
    )
    examples: list[Example] = []
    injected: dict[str, int] = {}
    looked = 0
    for key, slot in ranked:
        if len(examples) >= max_examples:
            break
        looked += 1
        session_id, position = slot[5], slot[7]
        if _instruction_in_call(key, slot) is not None:
            # A poisoned page or file must not come back as a past example for the next session,
            # nor must what the session did after reading it.
            filtered["prompt_injection"] += 1
            if session_id and position < injected.get(session_id, position + 1):
                injected[session_id] = position
                before = len(examples)
                examples = [
                    e for e in examples if e.session_id != session_id or (e.position or 0) <= position
                ]
                if len(examples) < before:
                    filtered["after_prompt_injection"] += before - len(examples)
            continue
        if session_id in injected and position > injected[session_id]:
            filtered["after_prompt_injection"] += 1
            continue
        examples.append(_example(key, slot, redactor))
    if len(ranked) > looked:
        filtered["beyond_max_examples"] += len(ranked) - looked
    if scrubber is not None:
        examples = [scrubber.scrub(example) for example in examples]
    return MiningResult(
        examples=examples,
        stats=stats,
        filtered=filtered,
        sessions_mined=partial.mined,
        distinct=len(kept),
        injected=injected,
    )


def personal_data_scrubber(
    config: MiningConfig | None = None, *, keep_personal_data: bool = False
) -> PersonalDataScrubber | None:
    """Return the scrubber kept examples (and episodes) go through, or None when it is turned off.

    Off when ``keep_personal_data`` is true or ``config.scrub_personal_data`` is false (default
    config: the effective ``mining.json``). Raises ConfigError on a bad ``mining.json``.
    """
    if keep_personal_data:
        return None
    config = config if config is not None else load_mining_config()
    if not config.scrub_personal_data:
        return None
    return PersonalDataScrubber.from_config(config)


def merge_partials(parts: Iterable[PartialMining]) -> PartialMining:
    """Return the parts of consecutive shards of one session stream merged as one pass would be.

    ``parts`` must come in stream order (shard 0 first). Counts add; each group keeps the
    representative (and last_seen) a single pass over the whole stream keeps, its sequence made
    global; groups stay in order of first occurrence, so ranking ties break the same way. The
    parts are consumed. Raises ValueError when ``parts`` is empty.
    """
    merged: PartialMining | None = None
    offset = 0
    for part in parts:
        if merged is None:
            merged = part
            offset = part.stats.sessions
            continue
        _merge_stats(merged.stats, part.stats)
        merged.filtered.update(part.filtered)
        merged.mined += part.mined
        kept = merged.kept
        for key, slot in part.kept.items():
            # Sequence numbers count sessions from the start of the whole stream.
            slot[2] += offset
            none_rep = slot[10]
            if none_rep is not None:
                none_rep[0] += offset
            into = kept.get(key)
            if into is None:
                kept[key] = slot
                continue
            into[0] += slot[0]
            before = into[1]  # the newest start time seen before this shard
            rep_recency = slot[9]
            # One pass replaces the representative with an occurrence whose session has no start
            # time, or one at least as new as every earlier one. This shard's own representative
            # passed that test within the shard; it passes overall unless an earlier shard saw a
            # newer session, in which case only the shard's occurrences without a start time pass.
            if rep_recency is None or before is None or rep_recency >= before:
                into[2:10] = slot[2:10]
            elif none_rep is not None:
                into[2:9] = none_rep
                into[9] = None
            newest = slot[1]
            if newest is not None and (before is None or newest > before):
                into[1] = newest
            if none_rep is not None:
                into[10] = none_rep
        offset += part.stats.sessions
    if merged is None:
        raise ValueError("merge_partials needs at least one part")
    return merged


def _merge_stats(into: MiningStats, other: MiningStats) -> None:
    into.sessions += other.sessions
    into.messages += other.messages
    into.calls_unanswered += other.calls_unanswered
    into.skipped.update(other.skipped)
    into.task_types.update(other.task_types)
    into.cohort_sessions.update(other.cohort_sessions)
    into.cohort_messages.update(other.cohort_messages)
    into.cohort_rewarded.update(other.cohort_rewarded)
    into.cohort_successes.update(other.cohort_successes)
    # The tally stays in the order one pass builds it: cohort by cohort, tools by first call.
    by_cohort: dict[str, dict[str, list[int]]] = {name: {} for name, _low, _high in COHORTS}
    for tally in (into.tally, other.tally):
        for (cohort, tool), counts in tally.items():
            found = by_cohort[cohort].get(tool)
            if found is None:
                by_cohort[cohort][tool] = list(counts)
            else:
                for i in range(4):
                    found[i] += counts[i]
    into.tally = {
        (cohort, tool): counts for cohort, tools in by_cohort.items() for tool, counts in tools.items()
    }


def _instruction_in_call(key: tuple[str, bytes], slot: list[Any]) -> str | None:
    """Return what the call's request, arguments or result tries to make an agent do, or None."""
    canonical = key[1]
    result, context, raw = slot[3], slot[4], slot[8]
    for text in (context, result, raw):
        if isinstance(text, str) and (why := instruction_in(text)) is not None:
            return why
    if canonical.startswith(b"raw:"):
        return None
    for text in _strings(orjson.loads(canonical)):
        if (why := instruction_in(text)) is not None:
            return why
    return None


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _example(key: tuple[str, bytes], slot: list[Any], redactor: SecretRedactor | None) -> Example:
    tool, canonical = key
    count, last_seen, _seq, result, context, session_id, source, position, raw = slot[:9]
    arguments: dict[str, Any] = {} if canonical.startswith(b"raw:") else orjson.loads(canonical)
    if redactor is not None:
        scoped = redactor.scoped([result, context, raw or "", *_strings(arguments)])
        arguments = scoped.value(arguments)
        result = scoped.text(result)
        context = scoped.text(context)
        raw = scoped.text(raw) if raw is not None else None
    return Example(
        tool_name=tool,
        arguments=arguments,
        raw_arguments=raw,
        result=result,
        outcome=OutcomeStatus.OK,
        context=context,
        session_id=session_id,
        source=source,
        position=position,
        count=count,
        last_seen=last_seen,
    )
