"""Episodes: the successful past tasks a template keeps as units, and per-tool coverage of examples.

An episode is one past session that succeeded (its reward is above 0 where the source records a
reward; any session that passes mining's filters where it does not): its opening request and the
calls that worked, in order. Selection retrieves the episodes most similar to a new task and lets
them decide which tools and which examples to show.

Coverage replaces one global cap on examples: every tool that worked keeps up to ``per_tool``
examples (the most frequent first), so a write call with unique arguments, seen once, is never
crowded out by a look-up seen a hundred times.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from kindling.injection import instruction_in
from kindling.mining.config import MiningConfig, load_mining_config
from kindling.mining.lessons import LessonCollector, PairedCall, paired_calls
from kindling.mining.model import Example, OutcomeStatus
from kindling.mining.outcome import OutcomeClassifier
from kindling.mining.passes import canonical_key
from kindling.mining.patterns import personal_data_scrubber
from kindling.mining.personal import PersonalDataScrubber
from kindling.mining.redact import SecretRedactor
from kindling.mining.tasktype import opening_request, request_text
from kindling.sessions.model import Session
from kindling.templates.model import Episode, EpisodeStep

__all__ = ["DEFAULT_PER_TOOL", "EpisodeCollector", "cover_tools", "episode_of", "link_copies", "link_steps"]

#: A step's call as mining groups calls: (session id, position, tool) -> a digest of the tool and
#: its canonical arguments. Kept in memory while a template is built, never stored.
CallKeys = dict[tuple[str, int, str], bytes]

DEFAULT_PER_TOOL = 20
_REQUEST_CHARS = 2000
_INSTRUCTION_KEYS = ("instruction", "task_instruction")


def _instruction(session: Session) -> str:
    for key in _INSTRUCTION_KEYS:
        value = session.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def episode_of(
    session: Session,
    classify: OutcomeClassifier,
    *,
    trivial: Collection[str] = (),
    redact: SecretRedactor | None = None,
    scrubber: PersonalDataScrubber | None = None,
    call_keys: CallKeys | None = None,
    calls: Sequence[PairedCall] | None = None,
) -> Episode | None:
    """Return ``session`` as an episode: its opening request and its calls that worked, in order.

    None when the session has no call that worked or no request. Calls are the agent's own
    (``requestor == "assistant"``), paired with their results by id; trivial tools are left out.
    ``redact`` hides credentials in the request texts; ``scrubber`` replaces personal data in them,
    finding the values in the whole episode (a name given as a call's argument is also replaced
    where the request says it). ``call_keys``, when given, receives each step's call key (see
    ``CallKeys``), for ``link_copies``.
    """
    if calls is None:
        calls = paired_calls(session, classify, trivial=trivial)
    keys: list[tuple[int, str, bytes]] = []
    steps: list[EpisodeStep] = []
    # Every call's values mark what is personal in the request, also a call that failed ("say
    # 98178 first, then 98186": the wrong zip is still this customer's).
    context = [{"arguments": dict(call.arguments), "result": call.result} for call in calls]
    for call in calls:
        if call.status is OutcomeStatus.OK:
            steps.append(EpisodeStep(tool_name=call.name, position=call.position))
            if call_keys is not None:
                keys.append(
                    (call.position, call.name, _call_key(call.name, call.arguments, call.raw_arguments))
                )
    opening = opening_request(session)
    request = _instruction(session) or opening
    if not steps or not request:
        return None
    if call_keys is not None:
        for call_position, name, key in keys:
            call_keys[(session.id, call_position, name)] = key
    steps.sort(key=lambda step: step.position)
    # The user message that led to each call, where that is a later turn than the opening ("my
    # name is ..., zip ..." asked for the look-up): scrubbed with the opening, by the whole
    # session's values, so a name said in one turn is replaced in every turn.
    asked = _asked_before(session, [step.position for step in steps])
    later = sorted({text for text in asked.values() if text and text != opening})
    if redact is not None:
        opening, request = redact.text(opening), redact.text(request)
        later_texts = [redact.text(text) for text in later]
    else:
        later_texts = list(later)
    if scrubber is not None:
        request, opening, *later_texts = scrubber.scrub_texts(
            [request, opening, *later_texts], context=context
        )
    shown = dict(zip(later, later_texts, strict=True))
    for step in steps:
        text = shown.get(asked.get(step.position, ""), "")
        if text and text != opening:
            step.request = text[:_REQUEST_CHARS]
    task_id = session.metadata.get("task_id")
    return Episode(
        session_id=session.id,
        request=request[:_REQUEST_CHARS],
        opening=opening[:_REQUEST_CHARS],
        task_id=None if task_id is None else str(task_id),
        source=session.source or "",
        reward=session.reward,
        steps=steps,
    )


def _asked_before(session: Session, positions: Sequence[int]) -> dict[int, str]:
    """Return, for each call position, the last user message before it with a request in it."""
    wanted = sorted(set(positions))
    asked: dict[int, str] = {}
    last, index = "", 0
    for position, message in enumerate(session.messages):
        while index < len(wanted) and wanted[index] <= position:
            asked[wanted[index]] = last
            index += 1
        if index == len(wanted):
            break
        if message.role == "user" and message.content:
            text = request_text(message.content)
            if text:
                last = text
    for position in wanted[index:]:
        asked[position] = last
    return asked


def _call_key(name: str, arguments: Any, raw_arguments: str | None) -> bytes:
    # The identity mining de-duplicates calls by (tool, canonical arguments), as a short digest:
    # it stays in memory only, and a big argument (a file written) costs 16 bytes, not its text.
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=16)
    digest.update(b"\0")
    digest.update(canonical_key(arguments, raw_arguments))
    return digest.digest()


class EpisodeCollector:
    """Collects the episodes of the sessions a build reads (called once per session, in order).

    A session counts when it would be mined (long enough, from a matching source, not errored) and
    succeeded where a reward exists (reward above 0). One whose request gives the agent
    instructions (``kindling.injection``) is left out and counted in ``injected``, as are those
    ``drop_sessions`` removes. The failures of the same sessions are collected in ``lessons``
    (also of sessions with no call that worked), and left out with them.
    """

    def __init__(
        self,
        *,
        min_messages: int = 0,
        source_filter: str | Collection[str] | None = None,
        skip_zero_reward: bool = True,
        skip_tools: Collection[str] | None = None,
        keep_personal_data: bool = False,
        config: MiningConfig | None = None,
    ) -> None:
        config = config if config is not None else load_mining_config()
        self.scrubber = personal_data_scrubber(config, keep_personal_data=keep_personal_data)
        self.classify = OutcomeClassifier(config.rules())
        self.trivial = frozenset(skip_tools) if skip_tools is not None else config.trivial()
        patterns = config.secrets()
        self.redact = SecretRedactor(patterns) if patterns else None
        self.end_reasons = config.end_reasons()
        self.min_messages = min_messages
        self.sources = (source_filter,) if isinstance(source_filter, str) else source_filter
        self.skip_zero_reward = skip_zero_reward
        self.episodes: list[Episode] = []
        self.call_keys: CallKeys = {}
        self.injected = 0  # successful sessions left out: their request or calls give the agent instructions
        #: The failed calls of the same sessions, with what worked next (``kindling.mining.lessons``).
        self.lessons = LessonCollector(redact=self.redact, scrubber=self.scrubber)

    def __call__(self, session: Session) -> None:
        """Keep ``session`` as an episode when it succeeded and passes the filters."""
        if len(session.messages) < self.min_messages:
            return
        if self.sources is not None and not any(
            fnmatch.fnmatchcase(session.source or "", p) for p in self.sources
        ):
            return
        calls = paired_calls(session, self.classify, trivial=self.trivial)
        # A failed call and what worked next teach as much in a task that failed or ended in an error
        # as in one that succeeded (failures are commoner there): lessons come from all of them,
        # episodes only from successes.
        failures = self.lessons.add(session, calls)
        if (session.end_reason and session.end_reason.lower() in self.end_reasons) or (
            self.skip_zero_reward and session.reward is not None and session.reward <= 0
        ):
            if failures and instruction_in(_instruction(session) or opening_request(session)):
                self.lessons.drop_sessions((session.id,))
            return
        episode = episode_of(
            session,
            self.classify,
            trivial=self.trivial,
            redact=self.redact,
            scrubber=self.scrubber,
            call_keys=self.call_keys,
            calls=calls,
        )
        if episode is None:
            if failures and instruction_in(_instruction(session) or opening_request(session)):
                self.lessons.drop_sessions((session.id,))
            return
        if instruction_in(episode.request) or instruction_in(episode.opening):
            self.injected += 1  # a request that gives the agent instructions is no past task to show
            self.lessons.drop_sessions((session.id,))
            return
        self.episodes.append(episode)

    def drop_sessions(self, sessions: Collection[str]) -> int:
        """Leave out the episodes of ``sessions`` (mining found calls in them steered by injected
        text: ``MiningResult.injected``); return how many were left out, also counted in ``injected``."""
        if not sessions:
            return 0
        self.lessons.drop_sessions(sessions)
        kept = [episode for episode in self.episodes if episode.session_id not in sessions]
        dropped = len(self.episodes) - len(kept)
        self.episodes = kept
        self.injected += dropped
        return dropped


def cover_tools(
    examples: Sequence[Example], *, per_tool: int = DEFAULT_PER_TOOL, max_examples: int | None = None
) -> tuple[list[Example], int]:
    """Return (kept examples in their given order, how many were left out) with every tool covered.

    Each tool keeps its first ``per_tool`` examples (the input is ranked: most frequent first).
    With ``max_examples``, tools then take turns, one example each, until that many are kept, so
    every tool keeps one before any keeps two.
    """
    by_tool: dict[str, list[int]] = defaultdict(list)
    for index, example in enumerate(examples):
        if len(by_tool[example.tool_name]) < per_tool:
            by_tool[example.tool_name].append(index)
    chosen: set[int]
    if max_examples is None:
        chosen = {i for indices in by_tool.values() for i in indices}
    else:
        chosen = set()
        depth = 0
        queues = list(by_tool.values())
        while len(chosen) < max_examples and any(depth < len(q) for q in queues):
            for queue in queues:
                if depth < len(queue) and len(chosen) < max_examples:
                    chosen.add(queue[depth])
            depth += 1
    kept = [examples[i] for i in sorted(chosen)]
    return kept, len(examples) - len(kept)


def link_steps(episodes: Iterable[Episode], examples: Sequence[Example]) -> dict[tuple[str, int, str], int]:
    """Return (session id, position, tool) -> index of the kept example that is that step's call.

    The tool is part of the key: calls made side by side in one message share its position.
    """
    wanted = {(e.session_id, s.position, s.tool_name) for e in episodes for s in e.steps}
    found: dict[tuple[str, int, str], int] = {}
    for index, example in enumerate(examples):
        key = (example.session_id, example.position, example.tool_name)
        if key in wanted:
            found.setdefault(key, index)
    return found


def link_copies(episodes: Sequence[Episode], examples: Sequence[Example], call_keys: CallKeys) -> int:
    """Point each step whose call another session's kept example shows to that example; return how many.

    A template keeps one example per distinct call (tool and arguments), shown by one session that
    made it; without this a past task whose calls were all shown by others would offer none.
    ``call_keys`` are the steps' call keys (``EpisodeCollector.call_keys``). Only the link is
    added; the warm-up shows such an example under the linking past task's request, with the result
    its own session recorded (``kindling.warmup.plan``).
    """
    owners: dict[bytes, tuple[str, int]] = {}
    shown: set[tuple[str, int, str]] = set()
    for example in examples:
        if example.outcome is OutcomeStatus.FAILED:
            continue
        place = (example.session_id, example.position, example.tool_name)
        shown.add(place)
        key = call_keys.get(place)
        if key is not None:
            owners.setdefault(key, (example.session_id, example.position))
    linked = 0
    for episode in episodes:
        for step in episode.steps:
            place = (episode.session_id, step.position, step.tool_name)
            if place in shown:
                continue
            owner = owners.get(call_keys.get(place, b""))
            if owner is not None:
                step.example_session, step.example_position = owner
                linked += 1
    return linked
