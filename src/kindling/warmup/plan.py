"""Decide what a warm-up shows: which template, which past tasks, which tools, which examples.

For a template with episodes (successful past tasks), the past tasks most similar to the new task
and per-tool models learned from all of them decide (``kindling.warmup.evidence``): the tools
and the number of examples with the best expected F-score under those models (only tools the
agent has); one example of each tool from the most similar past task that used it, then more of
the surest tool, from the most similar past tasks first. Templates without episodes (legacy files)
fall back to ranking their examples by BM25 relevance and variety (``rank_examples``).

``--auto`` picks the template whose past tasks fit the task best (``template_fit``); the task
type and tags, then least use, then the name only break ties.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kindling.mining.model import OutcomeStatus
from kindling.templates.index import choice_index, summary_of
from kindling.templates.model import EpisodeStep, Template
from kindling.warmup.build import Shown
from kindling.warmup.evidence import Similar, TaskEvidence, choose_tools
from kindling.warmup.query import Query, as_past_tasks_are_known, as_query
from kindling.warmup.select import DEFAULT_MAX_EXAMPLES, index_for, rank_examples, tokenize

__all__ = [
    "Plan",
    "Query",
    "as_past_tasks_are_known",
    "choose_template",
    "evidence_for",
    "plan_examples",
    "template_fit",
    "why_template",
]

SIMILAR_LIMIT = 20
# Below this similarity no past task is taken to say anything about the new task: its examples
# are the general list's, and the warm-up says so. TF-IDF cosine: 0.15 is a word or two in common.
SIMILARITY_FLOOR = 0.15
_REQUEST_PREVIEW = 160


@dataclass
class Plan:
    """The examples to offer, in order, and why: the tools' evidence and the past tasks used.

    ``general`` is True when the examples are the general list (the one that served all past tasks
    best) rather than matched to the task: no task, no past task similar enough, or too little gain.
    """

    candidates: list[Shown]
    tools: list[str]
    evidence: dict[str, float] = field(default_factory=dict)
    past_tasks: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    general: bool = False


_CACHE: OrderedDict[tuple[Any, ...], TaskEvidence] = OrderedDict()
_CACHE_SIZE = 32  # fitted models kept per process: a long-running one warms from many templates
# The same episodes list (held here, so its id cannot be reused) at the same length skips the
# fingerprint: hashing every episode cost ~0.6 ms a warm-up on a 400-task template, most of a
# proxy's warm-up, and a long-running caller passes the same template object again and again.
_BY_LIST: OrderedDict[int, tuple[list[Any], int, TaskEvidence]] = OrderedDict()


def evidence_for(template: Template) -> TaskEvidence:
    """Return the (cached) similarity and tool models of ``template``'s episodes."""
    episodes = template.episodes
    seen = _BY_LIST.get(id(episodes))
    if seen is not None and seen[0] is episodes and seen[1] == len(episodes):
        _BY_LIST.move_to_end(id(episodes))
        return seen[2]
    # Name and version identify stored templates; the fingerprint (everything the models read)
    # tells apart in-memory templates that share them.
    fingerprint = hash(
        tuple((e.session_id, e.opening, e.request, tuple(s.tool_name for s in e.steps)) for e in episodes)
    )
    key = (template.name, template.version, template.updated_at, len(episodes), fingerprint)
    found = _CACHE.get(key)
    if found is None:
        found = TaskEvidence(episodes)
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    _BY_LIST[id(episodes)] = (episodes, len(episodes), found)
    while len(_BY_LIST) > _CACHE_SIZE:
        _BY_LIST.popitem(last=False)
    return found


_CALLS: OrderedDict[tuple[int, int], tuple[list[Any], list[Any], int, list[list[tuple[str, int]]]]] = (
    OrderedDict()
)


def _calls_of(template: Template) -> list[list[tuple[str, int]]]:
    """Return per episode its calls that are usable examples: (tool, example index), in order (cached).

    A step is its session, its message and its tool: calls made side by side in one message share
    the message's position, and each finds its own tool's example, or the example of another
    session that is the same call (``EpisodeStep.example_session``). Failed examples are left out.
    """
    examples, episodes = template.examples, template.episodes
    key = (id(examples), id(episodes))
    seen = _CALLS.get(key)
    if (
        seen is not None
        and seen[0] is examples
        and seen[1] is episodes
        and seen[2] == len(examples) + len(episodes)
    ):
        return seen[3]
    linked = {
        (e.session_id, e.position, e.tool_name): i
        for i, e in enumerate(examples)
        if e.outcome is not OutcomeStatus.FAILED
    }
    calls = [
        [
            (step.tool_name, linked[call])
            for step in episode.steps
            if (call := _example_place(episode.session_id, step)) in linked
        ]
        for episode in episodes
    ]
    _CALLS[key] = (examples, episodes, len(examples) + len(episodes), calls)
    while len(_CALLS) > _CACHE_SIZE:
        _CALLS.popitem(last=False)
    return calls


_OWN: OrderedDict[int, tuple[list[Any], dict[str, Any]]] = OrderedDict()


def _episodes_by_session(episodes: list[Any]) -> dict[str, Any]:
    """``episodes`` by session id (cached per list, as ``_calls_of`` is)."""
    seen = _OWN.get(id(episodes))
    if seen is not None and seen[0] is episodes and len(seen[1]) <= len(episodes):
        return seen[1]
    found = {e.session_id: e for e in episodes}
    _OWN[id(episodes)] = (episodes, found)
    while len(_OWN) > _CACHE_SIZE:
        _OWN.popitem(last=False)
    return found


def _step_request(episode: Any, example: Any) -> str:
    """The request of ``episode``'s step whose call ``example`` shows ("" when the opening asked)."""
    place = (example.session_id, example.position, example.tool_name)
    for step in episode.steps:
        if step.request and _example_place(episode.session_id, step) == place:
            return str(step.request)
    return ""


def _example_place(session_id: str, step: EpisodeStep) -> tuple[str, int, str]:
    # Where the step's example is: its own call, or the same call kept from another session.
    if step.example_session is not None and step.example_position is not None:
        return (step.example_session, step.example_position, step.tool_name)
    return (session_id, step.position, step.tool_name)


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REQUEST_PREVIEW else text[: _REQUEST_PREVIEW - 1] + "…"


def plan_examples(
    template: Template,
    task: str | Query,
    *,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    tools: Collection[str] | None = None,
) -> Plan:
    """Return the candidate examples for ``task`` from ``template``, best first, with the reasons.

    ``tools`` is the agent's tools: no other tool is ever offered. Failed examples never are.
    ``task`` is the text or, parsed once for the whole warm-up, a ``Query``.
    """
    query = as_query(task)
    allowed = set(tools) if tools is not None else None
    usable = [
        i
        for i, e in enumerate(template.examples)
        if e.outcome is not OutcomeStatus.FAILED and (allowed is None or e.tool_name in allowed)
    ]
    if not template.episodes:
        return _legacy_plan(template, query.text, usable, allowed)
    examples = template.examples
    by_tool: dict[str, list[int]] = {}
    for i in usable:
        by_tool.setdefault(examples[i].tool_name, []).append(i)
    evidence = evidence_for(template)
    probabilities = {t: p for t, p in evidence.probabilities(query, allowed).items() if t in by_tool}
    # Every past task sharing a word with the task, most similar first; the closest decide the rest.
    by_similarity = evidence.similar(query, len(template.episodes))
    similar = by_similarity[:SIMILAR_LIMIT]
    # When nothing in the task is known the models give the base rates: the tools most past tasks used.
    ranked = sorted(probabilities.items(), key=lambda kv: (-kv[1], kv[0]))
    choice = choose_tools(probabilities, max_examples, {t: len(by_tool[t]) for t, _p in ranked})
    chosen = choice.tools
    episodes = template.episodes
    calls = _calls_of(template)
    opening = evidence.openings
    taken: list[int] = []
    used_from: dict[int, Similar] = {}
    drawn_from: dict[int, Similar] = {}

    def take(index: int, source: Similar | None) -> None:
        taken.append(index)
        if source is not None:
            used_from.setdefault(source.index, source)
            drawn_from[index] = source

    # Past tasks below the similarity floor say nothing about this one: their examples are not
    # shown as matched to it. A tool none of the others holds shows its most frequent example.
    near = [s for s in by_similarity if s.similarity >= SIMILARITY_FLOOR]
    similar = [s for s in similar if s.similarity >= SIMILARITY_FLOOR]
    for tool, indices in by_tool.items():
        by_tool[tool] = sorted(indices, key=lambda i: -examples[i].count)
    # One example of every chosen tool first, from the most similar past task that holds one (the
    # closest often called a tool whose example another task holds), else a general one of it.
    for tool in chosen:
        pick: tuple[int, Similar | None] | None = next(
            ((i, s) for s in near for name, i in calls[s.index] if name == tool and i not in taken),
            None,
        )
        if pick is None:
            spare = next((i for i in by_tool.get(tool, ()) if i not in taken), None)
            if spare is not None:
                pick = (spare, None)
        if pick is not None:
            take(*pick)
    # Then more examples, as many as the expected score asked for: the surest tool's, and when they
    # run out the next surest's; each tool's calls in the most similar past tasks first, in their
    # order, then the template's other examples of it.
    for tool in chosen:
        if len(taken) >= choice.examples:
            break
        more: list[tuple[int, Similar | None]] = [
            (i, s) for s in similar for name, i in calls[s.index] if name == tool
        ]
        more.extend((i, None) for i in by_tool[tool])
        for index, source in more:
            if len(taken) >= choice.examples:
                break
            if index not in taken:
                take(index, source)
    # Never worse than one fixed list: the task-matched choice gives way to the list that served all
    # past tasks best (``general_list``) when there is no task, when no past task is similar enough,
    # or when the gain the word models claim for it is below what their record on the past tasks
    # themselves warrants (``TaskEvidence.trust``): weak evidence leaves the general list.
    general = evidence.general_list(max_examples, {t: len(by_tool[t]) for t in probabilities})
    best = by_similarity[0].similarity if by_similarity else 0.0
    matched = [examples[i].tool_name for i in taken]
    if not query.text.strip():
        fallback = "no task given, so they are chosen without one: the list that served"
    elif best < SIMILARITY_FLOOR:
        fallback = (
            f"no past task is similar enough (best similarity {best:.2f}, below {SIMILARITY_FLOOR:.2f}): "
            "the list that served"
        )
    elif general and sorted(general) != sorted(matched):
        available = {t: len(by_tool[t]) for t in probabilities}
        lists = evidence.counts([matched, general])
        # The gain is claimed by the models that were judged (fitted without each past task), so
        # it is read against the threshold their own record set.
        threshold = evidence.trust(max_examples, available)
        judged = evidence.probabilities(query, set(probabilities), judged=True)
        claimed = float(np.subtract(*evidence.expected_f1(lists, judged, max_examples)))
        fallback = (
            f"{len(similar)} past tasks resemble this one (best similarity {best:.2f}), but what the task says "
            f"gains too little over the list that served"
            if not claimed > threshold
            else ""
        )
    else:
        fallback = ""
    if fallback and general:
        taken.clear()
        used_from.clear()
        drawn_from.clear()
        sources = near
        wanted = Counter(general)
        for tool in dict.fromkeys(general):
            found: list[tuple[int, Similar | None]] = [
                (i, s) for s in sources for name, i in calls[s.index] if name == tool
            ]
            found.extend((i, None) for i in by_tool[tool])
            for index, source in found:
                if wanted[tool] <= 0:
                    break
                if index not in taken:
                    take(index, source)
                    wanted[tool] -= 1
        chosen = list(dict.fromkeys(general))
    # An example is shown under the user message that led to its call in the past task it was drawn
    # from (a later turn's "my name is ..., zip ..." asked for the look-up, not the opening "hi"),
    # else under that task's opening request: the same call, when another session's example shows
    # it (its arguments are the same; its result is that session's).
    own = _episodes_by_session(episodes)
    candidates = []
    for i in taken:
        source = drawn_from.get(i)
        past_task = episodes[source.index].session_id if source is not None else examples[i].session_id
        shown_as = "" if past_task == examples[i].session_id else past_task
        episode = episodes[source.index] if source is not None else own.get(past_task)
        asked = _step_request(episode, examples[i]) if episode is not None else ""
        request = asked or opening.get(past_task, "")
        candidates.append(Shown(examples[i], request, shown_as))
    past = [
        {
            "session_id": episodes[s.index].session_id,
            "task_id": episodes[s.index].task_id,
            "similarity": round(s.similarity, 3),
            "request": _preview(opening[episodes[s.index].session_id]),
        }
        for s in sorted(used_from.values(), key=lambda s: (-s.similarity, s.index))
    ]
    if fallback and general:
        reason = f"{fallback} the {len(episodes)} past tasks best"
    elif similar:
        reason = (
            f"{len(similar)} past tasks resemble this one (best similarity {similar[0].similarity:.2f}); "
            f"tools shown where the evidence from all {len(episodes)} past tasks makes them worth it"
        )
    else:
        reason = f"no past task resembles this one: the tools most of the {len(episodes)} past tasks used"
    return Plan(
        candidates,
        chosen,
        {t: round(p, 3) for t, p in sorted(probabilities.items())},
        past,
        reason,
        general=bool(fallback and general),
    )


def _legacy_plan(template: Template, task: str, usable: list[int], allowed: set[str] | None) -> Plan:
    order = rank_examples(template.examples, task, index=index_for(template))
    keep = set(usable)
    ranked = [i for i in order if i in keep]
    return Plan(
        [Shown(template.examples[i]) for i in ranked],
        list(dict.fromkeys(template.examples[i].tool_name for i in ranked)),
        reason="no past tasks in this template: examples ranked by relevance to the task (BM25), varied over tools",
    )


def template_fit(template: Template, task: str | Query) -> float:
    """Return how well ``template``'s past tasks fit ``task``: the mean similarity of the best three.

    Templates without episodes are judged by their examples' requests the same way. Reads the
    template's summary for choosing (``kindling.templates.index``), not its tool models.
    """
    return summary_of(template).fit(as_query(task))


def choose_template(
    templates: Sequence[Template], task: str | Query, *, tools: Collection[str] | None = None
) -> Template | None:
    """Return the template whose past tasks fit ``task`` best, or None when none has a usable example.

    ``tools`` is the agent's tools (None: any): a template with no usable example of one of them
    is not considered. Ties in fit (rounded to 3 decimals) go by task type (same as the task
    text's, then untyped or ``mixed``), then more tags named in the task, then least used, then name.
    The fits of all templates come from one index over their summaries (``choice_index``), built
    once per set of template versions, so the cost grows with the task's words, not the templates.
    """
    index = choice_index(templates)
    candidates = index.usable(tools)
    if not candidates:
        return None
    query = as_query(task)
    fits = index.fits(query)
    # Only fits within 0.001 of the best can round to the best's 3 decimals: the rest are out.
    top = float(fits[candidates].max())
    near = [i for i in candidates if fits[i] >= top - 0.001]
    rounded = {i: round(float(fits[i]), 3) for i in near}
    best = max(rounded.values())
    task_tokens = set(query.tokens)

    def type_rank(template: Template) -> int:
        if template.task_type == query.task_type:
            return 0
        if template.task_type in (None, "mixed"):
            return 1
        return 2

    def tag_overlap(i: int) -> int:
        return sum(1 for tag in templates[i].tags if set(tokenize(tag)) & task_tokens)

    chosen = min(
        (i for i in near if rounded[i] == best),
        key=lambda i: (type_rank(templates[i]), -tag_overlap(i), templates[i].usage_count, templates[i].name),
    )
    return templates[chosen]


def why_template(template: Template, task: str | Query, considered: int) -> str:
    """Return one sentence on why ``template`` was chosen among ``considered`` templates."""
    fit = template_fit(template, task)
    if not as_query(task).text.strip():
        if considered <= 1:
            return "the only template with usable examples; no task given, so it is chosen without one"
        return (
            f"no task given, so chosen without one among {considered} templates "
            "(by task type, then least used, then name)"
        )
    if considered <= 1:
        return f"the only template with usable examples (fit {fit:.2f})"
    return f"its past tasks fit the task best of {considered} templates (fit {fit:.2f})"
