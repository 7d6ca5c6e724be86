"""Turn sessions into the examples worth keeping, and count what was seen on the way.

``mine`` is pure: it takes an iterable of sessions (from any reader) and does no I/O of its own
beyond reading the optional ``mining.json``. It walks each session once, pairs every call the agent
made with its result by ``tool_call_id`` (parallel calls answer in any order), decides each
outcome, and keeps only calls that worked, from sessions that pass the filters, de-duplicated by
tool and canonical arguments. Memory grows with the number of distinct (tool, arguments) pairs,
never with the number of sessions read.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from kindling.mining.config import MiningConfig, load_mining_config
from kindling.mining.model import Example, OutcomeStatus
from kindling.mining.outcome import OutcomeClassifier
from kindling.mining.personal import PersonalDataScrubber
from kindling.mining.redact import SecretRedactor
from kindling.mining.stats import COHORTS, NO_TOOLS, MiningStats, cohort_of
from kindling.mining.tasktype import TaskClassifier
from kindling.sessions.model import ReadReport, Session, ToolCall, session_rows

DEFAULT_MIN_MESSAGES = 20
DEFAULT_MAX_EXAMPLES = 100
DEFAULT_RESULT_CHARS = 2000
DEFAULT_CONTEXT_CHARS = 1000

_OK = OutcomeStatus.OK
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
# An open call: the call, its message index, the request before it, and its (cohort, tool) tally.
_Pending = tuple[ToolCall, int, str, list[int]]
_FAILED = OutcomeStatus.FAILED
_KEY_CACHE_ENTRIES = 1024


def truncate(text: str, limit: int) -> str:
    """Return ``text`` cut to ``limit`` characters plus a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n…[truncated {len(text) - limit} of {len(text)} chars]"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def canonical_arguments(call: ToolCall) -> bytes:
    """Return the key two calls share when their arguments are the same up to key order and spacing.

    Parsed arguments become JSON with sorted keys; raw (non-JSON) arguments keep their text with
    runs of whitespace collapsed, prefixed so they never collide with a JSON form.
    """
    if call.raw_arguments is not None and not call.arguments:
        return b"raw:" + " ".join(call.raw_arguments.split()).encode("utf-8")
    args = call.arguments if isinstance(call.arguments, dict) else dict(call.arguments)
    return orjson.dumps(args, option=_SORTED, default=_jsonable)


@dataclass
class MiningResult:
    """What ``mine`` returns: the examples (ranked, capped), the stats, and why things were left out.

    ``filtered`` counts sessions and calls kept out of the examples by a filter, by reason
    (``too_short``, ``source_filtered``, ``errored_session``, ``zero_reward``, ``trivial_tool``,
    ``outcome_failed``, ``outcome_unknown``, ``beyond_max_examples``). ``distinct`` is how many
    distinct (tool, arguments) pairs worked before the cap; ``sessions_mined`` how many sessions
    passed the filters.
    """

    examples: list[Example]
    stats: MiningStats
    filtered: Counter[str] = field(default_factory=Counter)
    sessions_mined: int = 0
    distinct: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Return the stats plus the mining counts and the examples, JSON-ready."""
        return {
            **self.stats.as_dict(),
            "sessions_mined": self.sessions_mined,
            "distinct_examples": self.distinct,
            "filtered": dict(sorted(self.filtered.items())),
            "examples": [example.model_dump(mode="json") for example in self.examples],
        }


def _as_patterns(value: str | Collection[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


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


@dataclass
class PartialMining:
    """What one pass of ``mine`` saw before ranking: the unit parallel mining merges.

    ``kept`` maps (tool, canonical arguments) to the group's slot (see ``mine_partial``) in order
    of first occurrence; ``stats`` has its per-(cohort, tool) tally but no totals yet.
    """

    stats: MiningStats
    filtered: Counter[str]
    kept: dict[tuple[str, bytes], list[Any]]
    mined: int


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
    classify = OutcomeClassifier(config.rules()).classify
    # Sessions are typed by their calls here: the task-text keywords (one large expression to
    # compile) are not needed.
    tasks = TaskClassifier(config.families())
    sources = _as_patterns(source_filter)
    end_reasons = (
        frozenset(r.lower() for r in skip_end_reasons)
        if skip_end_reasons is not None
        else config.end_reasons()
    )
    trivial = frozenset(skip_tools) if skip_tools is not None else config.trivial()
    want_examples = keep_examples

    stats = MiningStats()
    filtered: Counter[str] = Counter()
    skipped = stats.skipped
    tally = stats.tally
    # Per cohort, tool -> [calls, results, failures, unknown]: one lookup by name per call.
    tallies: dict[str, dict[str, list[int]]] = {name: {} for name, _low, _high in COHORTS}
    # (tool, canonical arguments) -> [count, last_seen, sequence, result, context, session_id, source,
    # position, raw_arguments, rep_recency, none_rep]: plain lists, because this is touched for every
    # successful call. Items 2-8 describe the representative occurrence; rep_recency is its
    # session's start time; none_rep is items 2-8 of the group's last occurrence from a session
    # without a start time (None if none), which merge_partials needs to pick the representative a
    # single pass would have kept.
    kept: dict[tuple[str, bytes], list[Any]] = {}
    # id(arguments object) -> (the object, tool name, its key in ``kept``); bounded.
    keys: dict[int, tuple[Any, str, tuple[str, bytes]]] = {}
    mined = 0
    unanswered = 0
    dumps = orjson.dumps
    classify_calls = tasks.classify_calls

    # The filters are judged when examples are kept, and also in stats-only mode when
    # ``max_sessions`` needs to know which sessions count as mined.
    judge = want_examples or max_sessions is not None
    if max_sessions == 0:
        sessions = ()  # read nothing at all, not even one session
    # Row form: a reader that holds its messages as tuples hands them over without building a
    # Message per row (kindling.sessions.model.SessionStream); other sessions are converted.
    for sequence, (session, messages) in enumerate(session_rows(sessions)):
        count = len(messages)
        cohort = cohort_of(count)
        stats.sessions += 1
        stats.messages += count
        stats.cohort_sessions[cohort] += 1
        stats.cohort_messages[cohort] += count
        if session.reward is not None:
            stats.count_reward(cohort, session.reward)

        eligible = False
        if judge:
            reason = _filter_reason(session, count, min_messages, sources, end_reasons, skip_zero_reward)
            if reason is not None:
                filtered[reason] += 1
            else:
                mined += 1
                eligible = want_examples
        recency = session.started_at
        session_id = session.id
        session_source = session.source

        # Every call of the session by id: its open entry until a result answers it, then None.
        calls: dict[str, _Pending | None] = {}
        opened = 0
        foreign: set[str] = set()
        names: list[str] = []
        cohort_tally = tallies[cohort]
        request = ""
        for position, (role, content, tool_calls, call_id, tool_name, error, _stamp, _reasoning) in enumerate(
            messages
        ):
            if role == "tool":
                entry = calls.get(call_id) if call_id is not None else _pair_without_id(calls, tool_name)
                if entry is None:
                    if call_id in foreign:
                        continue
                    skipped["duplicate_result" if call_id in calls else "result_without_call"] += 1
                    continue
                call, call_position, call_request, counts = entry
                calls[call.id] = None
                opened -= 1
                status = classify(call.name, content, error).status
                counts[1] += 1
                if status is not _OK:
                    if status is _FAILED:
                        counts[2] += 1
                    else:
                        counts[3] += 1
                    if eligible:
                        if call.name in trivial:
                            filtered["trivial_tool"] += 1
                        else:
                            filtered["outcome_failed" if status is _FAILED else "outcome_unknown"] += 1
                    continue
                if not eligible:
                    continue
                name = call.name
                if name in trivial:
                    filtered["trivial_tool"] += 1
                    continue
                args = call.arguments
                if type(args) is dict and args:
                    # Readers share one parsed object between calls with the same argument text, so
                    # the key is computed once per object. The entry holds the object, so its id
                    # cannot be reused by another while the entry lives.
                    cached = keys.get(id(args))
                    if cached is not None and cached[0] is args and cached[1] == name:
                        key = cached[2]
                    else:
                        canonical = dumps(args, option=_SORTED, default=_jsonable)
                        # orjson's bytes keep a ~4 KB buffer; a right-sized copy keeps memory small.
                        key = (name, bytes(memoryview(canonical)))
                        if len(keys) >= _KEY_CACHE_ENTRIES:
                            keys.clear()
                        keys[id(args)] = (args, name, key)
                else:
                    key = (name, bytes(memoryview(canonical_arguments(call))))
                slot = kept.get(key)
                if slot is None:
                    slot = kept[key] = [1, recency, 0, "", "", "", "", 0, None, None, None]
                else:
                    slot[0] += 1
                    if recency is not None:
                        if slot[1] is not None and recency < slot[1]:
                            continue
                        slot[1] = recency
                # The newest occurrence speaks for the group: its result and request are current.
                result_text = content or ""
                if len(result_text) > result_chars:
                    result_text = truncate(result_text, result_chars)
                if len(call_request) > context_chars:
                    call_request = truncate(call_request, context_chars)
                # One slice store instead of eight item stores: this runs for every kept call.
                slot[2:10] = (
                    sequence,
                    result_text,
                    call_request,
                    session_id,
                    session_source,
                    call_position,
                    call.raw_arguments if not args else None,
                    recency,
                )
                if recency is None:
                    slot[10] = slot[2:9]
            elif role == "user":
                if content:
                    request = content
                for call in tool_calls:
                    foreign.add(call.id)
                    skipped["user_tool_call"] += 1
            elif tool_calls:
                for call in tool_calls:
                    call_id = call.id
                    if call.requestor != "assistant":
                        foreign.add(call_id)
                        skipped["user_tool_call"] += 1
                        continue
                    # An id still waiting for its result is a duplicate; an id already answered
                    # may be reused by a later turn (providers that number calls per turn, e.g.
                    # "call_0"), and that later call is paired with the next result bearing it.
                    if calls.get(call_id) is not None:
                        skipped["duplicate_call_id"] += 1
                        continue
                    name = call.name
                    found = cohort_tally.get(name)
                    if found is None:
                        found = cohort_tally[name] = [0, 0, 0, 0]
                    found[0] += 1
                    calls[call_id] = (call, position, request, found)
                    opened += 1
                    names.append(name)
        unanswered += opened
        stats.task_types[classify_calls(names).value if names else NO_TOOLS] += 1
        if max_sessions is not None and mined >= max_sessions:
            break

    stats.calls_unanswered = unanswered
    for cohort_name, by_tool in tallies.items():
        for tool, counts in by_tool.items():
            tally[(cohort_name, tool)] = counts
    return PartialMining(stats=stats, filtered=filtered, kept=kept, mined=mined)


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
    unless ``keep_personal_data`` or the config's ``scrub_personal_data`` is false. Only the kept
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
    if len(ranked) > max_examples:
        filtered["beyond_max_examples"] += len(ranked) - max_examples
    examples = [_example(key, slot, redactor) for key, slot in ranked[:max_examples]]
    if scrubber is not None:
        examples = [scrubber.scrub(example) for example in examples]
    return MiningResult(
        examples=examples, stats=stats, filtered=filtered, sessions_mined=partial.mined, distinct=len(kept)
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


def _filter_reason(
    session: Session,
    count: int,
    min_messages: int,
    sources: tuple[str, ...] | None,
    end_reasons: frozenset[str],
    skip_zero_reward: bool,
) -> str | None:
    if count < min_messages:
        return "too_short"
    if sources is not None and not any(fnmatch.fnmatchcase(session.source or "", p) for p in sources):
        return "source_filtered"
    if session.end_reason and session.end_reason.lower() in end_reasons:
        return "errored_session"
    if skip_zero_reward and session.reward is not None and session.reward <= 0:
        return "zero_reward"
    return None


def _pair_without_id(calls: dict[str, _Pending | None], name: str | None) -> _Pending | None:
    # A result with no id answers the oldest open call of its tool (or the oldest open call).
    for entry in calls.values():
        if entry is not None and (name is None or entry[0].name == name):
            return entry
    return None


def _example(key: tuple[str, bytes], slot: list[Any], redactor: SecretRedactor | None) -> Example:
    tool, canonical = key
    count, last_seen, _seq, result, context, session_id, source, position, raw = slot[:9]
    arguments: dict[str, Any] = {} if canonical.startswith(b"raw:") else orjson.loads(canonical)
    if redactor is not None:
        arguments = redactor.value(arguments)
        result = redactor.text(result)
        context = redactor.text(context)
        raw = redactor.text(raw) if raw is not None else None
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
