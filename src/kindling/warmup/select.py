"""Choose what to warm a new session with: the template, then its examples, under a token budget.

Examples are ranked by BM25 relevance (``bm25s``) of their request context, tool name and
arguments to the task text, plus the relevance of the past session they came from; the ranking is
then made diverse (no tool repeats while another relevant tool is still unused, and one example of
each remaining tool comes before any repeat, since tasks use tools their text does not name);
finally examples are taken in that order while they fit the token budget, each result truncated to
a per-example share. ``bench/selection.py`` measures this against the prototypes' rules.

Templates with episodes are planned by ``kindling.warmup.plan``; this ranking serves templates
without them, and ``fill_budget`` takes whole examples under the budget for both.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kindling.mining.model import Example, OutcomeStatus
from kindling.templates.model import Template
from kindling.warmup.build import (
    READABLE_RESULT_TOKENS,
    Shown,
    check_style,
    example_cost,
    frame_cost,
    request_cost,
    system_message,
)
from kindling.warmup.tokens import estimate_message_tokens

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_EXAMPLES",
    "ExampleIndex",
    "Selection",
    "rank_examples",
    "select_examples",
    "tokenize",
]

DEFAULT_BUDGET = 2000
DEFAULT_MAX_EXAMPLES = 8
_SMALLEST_EXAMPLE = 16  # three messages' overhead plus a few tokens: below this nothing fits
_CALL_ALLOWANCE = 40  # what a call (name, arguments, id) typically costs beside its result
_GIVE_UP_AFTER = 64  # consecutive candidates that did not fit before the fill stops looking
_TOKEN_RE = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be but by do for from has have how i if in into is it its me my of on or "  # noqa: SIM905
    "our please so that the their then there these this to up us was we what when where which "
    "with you your can could would should will use using run".split()
)
SESSION_WEIGHT = 1.0  # how much the source session's relevance adds to an example's own
_ARG_CHARS = 300  # argument text indexed per example: enough for paths, queries and commands


def tokenize(text: str) -> list[str]:
    """Return the lower-case word tokens of ``text`` that carry meaning (identifiers split on ``_``)."""
    return [t for t in _TOKEN_RE.findall(text.lower()) if len(t) > 1 and t not in _STOPWORDS]


def _document(example: Example) -> list[str]:
    parts = [example.tool_name, example.tool_name, example.context]
    for key, value in example.arguments.items():
        parts.append(str(key))
        parts.append(value if isinstance(value, str) else str(value))
    return tokenize(" ".join(parts)[: len(example.context) + _ARG_CHARS + 2 * len(example.tool_name) + 4])


class ExampleIndex:
    """BM25 indexes over a list of examples (built once per template version, then cached).

    Two indexes: one over each example (its request, tool and arguments) and one over each source
    session (every example mined from it, pooled). A request like "great, keep going" says little
    alone; the session it came from says what the whole task was about.
    """

    def __init__(self, examples: Sequence[Example], *, session_weight: float = SESSION_WEIGHT) -> None:
        self.examples = list(examples)
        self.session_weight = session_weight
        docs = [_document(e) for e in self.examples]
        groups: dict[str, int] = {}
        self._group_of = np.fromiter(
            (groups.setdefault(e.session_id or f"#{i}", len(groups)) for i, e in enumerate(self.examples)),
            dtype=np.int64,
            count=len(self.examples),
        )
        pooled: list[list[str]] = [[] for _ in groups]
        for i, doc in enumerate(docs):
            pooled[int(self._group_of[i])].extend(doc)
        self._examples_bm25 = _bm25(docs)
        self._sessions_bm25 = _bm25(pooled) if session_weight else None
        # Per-example arrays the ranking needs on every call, computed once.
        tool_ids: dict[str, int] = {}
        self.tool_ids = np.fromiter(
            (tool_ids.setdefault(e.tool_name, len(tool_ids)) for e in self.examples),
            dtype=np.int64,
            count=len(self.examples),
        )
        self.log_counts = np.fromiter(
            (math.log1p(max(e.count, 1)) for e in self.examples), dtype=np.float64, count=len(self.examples)
        )
        self.failed = np.fromiter(
            (e.outcome is OutcomeStatus.FAILED for e in self.examples), dtype=bool, count=len(self.examples)
        )

    def scores(self, task: str) -> np.ndarray:
        """Return one relevance score per example for ``task`` (all zero when nothing matches)."""
        query = tokenize(task)
        scores = _scores(self._examples_bm25, query, len(self.examples))
        if self._sessions_bm25 is not None and len(self.examples):
            per_session = _scores(self._sessions_bm25, query, int(self._group_of.max()) + 1)
            scores = scores + self.session_weight * per_session[self._group_of]
        return scores


def _bm25(docs: list[list[str]]) -> Any:
    if not docs:
        return None
    import bm25s

    index = bm25s.BM25()
    index.index([doc or ["__empty__"] for doc in docs], show_progress=False)
    return index


def _scores(index: Any, query: list[str], size: int) -> np.ndarray:
    if index is None:
        return np.zeros(size, dtype=np.float32)
    ids = index.get_tokens_ids(query)
    if not ids:
        return np.zeros(size, dtype=np.float32)
    return np.asarray(index.get_scores_from_ids(ids), dtype=np.float32)


_INDEX_CACHE: OrderedDict[tuple[Any, ...], ExampleIndex] = OrderedDict()
_INDEX_CACHE_SIZE = 32


def index_for(template: Template) -> ExampleIndex:
    """Return the (cached) index of ``template``'s examples, keyed by name, version and content."""
    # Name and version identify stored templates; the fingerprint catches in-memory templates that
    # share a name. It covers everything the index reads (indexed text, session, count, outcome):
    # keyed on less, a template whose examples differ only in outcome got the other's index and
    # injected failed calls. It costs well under a millisecond for 1,000 examples.
    fingerprint = hash(
        tuple(
            (e.tool_name, e.context, e.session_id, e.count, e.outcome, e.raw_arguments, repr(e.arguments))
            for e in template.examples
        )
    )
    key = (template.name, template.version, template.updated_at, len(template.examples), fingerprint)
    index = _INDEX_CACHE.get(key)
    if index is None:
        index = ExampleIndex(template.examples)
        _INDEX_CACHE[key] = index
        while len(_INDEX_CACHE) > _INDEX_CACHE_SIZE:
            _INDEX_CACHE.popitem(last=False)
    else:
        _INDEX_CACHE.move_to_end(key)
    return index


def _round_robin(order: np.ndarray, tools: np.ndarray) -> np.ndarray:
    """Reorder ``order`` so each round takes one example per tool, tools by first appearance."""
    if not len(order):
        return order
    t = tools[order]
    by_tool = np.argsort(t, kind="stable")
    sorted_tools = t[by_tool]
    starts = np.flatnonzero(np.r_[True, sorted_tools[1:] != sorted_tools[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(t)]))
    depth = np.empty(len(t), dtype=np.int64)
    depth[by_tool] = np.arange(len(t)) - group_start
    first_pos = np.empty(int(tools.max()) + 1, dtype=np.int64)
    first_pos[t[depth == 0]] = np.flatnonzero(depth == 0)
    return order[np.lexsort((first_pos[t], depth))]


def rank_examples(
    examples: Sequence[Example],
    task: str,
    *,
    index: ExampleIndex | None = None,
    include_failed: bool = False,
) -> list[int]:
    """Return example indices, best first.

    Order: the best example of each relevant tool; then the most frequent example of each tool
    not yet covered; then the remaining relevant examples round-robin over tools; then the rest.
    Relevance is BM25 of the task text against each example (context, tool, arguments) and its
    source session; ties and irrelevant examples go by how often the call was seen. Failed
    examples are left out unless ``include_failed``.
    """
    if not examples:
        return []
    if index is None or len(index.examples) != len(examples):
        index = ExampleIndex(examples)
    scores = index.scores(task).astype(np.float64)
    tools, counts = index.tool_ids, index.log_counts
    usable = np.ones(len(examples), dtype=bool) if include_failed else ~index.failed
    relevant = np.flatnonzero(usable & (scores > 0))
    rest = np.flatnonzero(usable & (scores <= 0))
    # A tiny frequency prior breaks BM25 ties without overriding relevance; index breaks the rest.
    relevant = relevant[np.lexsort((relevant, -(scores[relevant] + 1e-3 * counts[relevant])))]
    rest = rest[np.lexsort((rest, -counts[rest]))]
    ranked = _round_robin(relevant, tools)
    rest_ranked = _round_robin(rest, tools)
    relevant_tools = np.unique(tools[relevant])
    # After one example of every relevant tool, one of every other tool (most frequent first)
    # comes before any relevant tool repeats: tasks use tools their text does not name.
    _, first_of_tool = np.unique(tools[rest_ranked], return_index=True)
    newcomers = rest_ranked[np.sort(first_of_tool)]
    newcomers = newcomers[~np.isin(tools[newcomers], relevant_tools)]
    leftover = rest_ranked[~np.isin(rest_ranked, newcomers)]
    first_round = len(relevant_tools)
    return np.concatenate((ranked[:first_round], newcomers, ranked[first_round:], leftover)).tolist()


@dataclass
class Selection:
    """Examples chosen for a task, in order, with the requests they are shown under.

    ``example_tokens`` is the cap on each shown result (never below the readable minimum).
    """

    examples: list[Example]
    example_tokens: int
    system_prompt: str | None
    requests: list[str] = field(default_factory=list)
    past_tasks: list[str] = field(default_factory=list)

    @property
    def shown(self) -> list[Shown]:
        """The chosen examples paired with their requests, ready for ``build_conversation``."""
        requests = self.requests or [""] * len(self.examples)
        past = self.past_tasks or [""] * len(self.examples)
        return [Shown(e, r, p) for e, r, p in zip(self.examples, requests, past, strict=True)]


def fill_budget(
    candidates: Sequence[Shown],
    *,
    budget: int,
    style: str = "triples",
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    system_prompt: str | None = None,
) -> Selection:
    """Return whole examples from ``candidates``, in order, while they fit ``budget`` tokens.

    Each result is capped at an equal share of the budget (``budget / max_examples``) but never
    below the readable minimum: when the budget is small, fewer examples are shown, never stubs.
    An example whose request is already shown adds only its call and result.
    Raises ConversationError for an unknown style.
    """
    chosen_style = check_style(style)
    remaining = budget - frame_cost()
    system = system_message(system_prompt or "", budget)
    if system is not None:
        remaining -= estimate_message_tokens(system)
    slots = max(1, min(max_examples, len(candidates)))
    result_tokens = max(READABLE_RESULT_TOKENS, remaining // slots - _CALL_ALLOWANCE)
    chosen: list[Shown] = []
    numbers: dict[str, int] = {}
    misses = 0
    for item in candidates:
        if len(chosen) >= max_examples or remaining < _SMALLEST_EXAMPLE or misses >= _GIVE_UP_AFTER:
            break
        text = item.request_text
        cost = example_cost(item.example, result_tokens)
        if text not in numbers:
            cost += request_cost(text, len(numbers) + 1, chosen_style, first=not numbers)
        if cost > remaining:
            misses += 1
            continue
        misses = 0
        remaining -= cost
        numbers.setdefault(text, len(numbers) + 1)
        chosen.append(item)
    return Selection(
        [c.example for c in chosen],
        result_tokens,
        system["content"] if system else None,
        [c.request for c in chosen],
        [c.past_task for c in chosen],
    )


def select_examples(
    examples: Sequence[Example],
    task: str,
    *,
    budget: int = DEFAULT_BUDGET,
    style: str = "triples",
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    system_prompt: str | None = None,
    index: ExampleIndex | None = None,
    order: Sequence[int] | None = None,
) -> Selection:
    """Return the examples to inject for ``task``: ranked, diverse, whole, within ``budget`` tokens.

    ``order`` overrides the ranking (used by the benchmark's baselines). Raises ConversationError
    for an unknown style.
    """
    ranking = list(order) if order is not None else rank_examples(examples, task, index=index)
    return fill_budget(
        [Shown(examples[i]) for i in ranking],
        budget=budget,
        style=style,
        max_examples=max_examples,
        system_prompt=system_prompt,
    )
