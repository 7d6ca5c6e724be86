"""Choose what to warm a new session with: the template, then its examples, under a token budget.

Examples are ranked by BM25 relevance (``bm25s``) of their request context, tool name and
arguments to the task text; the ranking is then made diverse (no tool repeats while another
relevant tool is still unused); finally examples are taken in that order while they fit the token
budget, each result truncated to a per-example share. A template is chosen by the task text's
task type, then by tags named in the task, then least-used first (the prototypes' rule).
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kindling.mining.model import Example, OutcomeStatus
from kindling.templates.model import Template
from kindling.warmup.build import (
    check_style,
    render_example,
    system_message,
    tool_call_id,
)
from kindling.warmup.tokens import estimate_message_tokens

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_EXAMPLES",
    "ExampleIndex",
    "Selection",
    "choose_template",
    "rank_examples",
    "select_examples",
    "tokenize",
]

DEFAULT_BUDGET = 2000
DEFAULT_MAX_EXAMPLES = 8
_SMALLEST_EXAMPLE = 16  # three messages' overhead plus a few tokens: below this nothing fits
_GIVE_UP_AFTER = 64  # consecutive candidates that did not fit before the fill stops looking
_TOKEN_RE = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "up",
        "us",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "with",
        "you",
        "your",
        "can",
        "could",
        "would",
        "should",
        "will",
        "use",
        "using",
        "run",
    ]
)
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
    """A BM25 index over a list of examples (built once per template version, then cached)."""

    def __init__(self, examples: Sequence[Example]) -> None:
        import bm25s

        self.examples = list(examples)
        docs = [_document(e) or ["__empty__"] for e in self.examples]
        self._bm25: Any = None
        if docs:
            self._bm25 = bm25s.BM25()
            self._bm25.index(docs, show_progress=False)

    def scores(self, task: str) -> np.ndarray:
        """Return one BM25 score per example for ``task`` (all zero when nothing matches)."""
        if self._bm25 is None:
            return np.zeros(0, dtype=np.float32)
        ids = self._bm25.get_tokens_ids(tokenize(task))
        if not ids:
            return np.zeros(len(self.examples), dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)


_INDEX_CACHE: OrderedDict[tuple[Any, ...], ExampleIndex] = OrderedDict()
_INDEX_CACHE_SIZE = 32


def index_for(template: Template) -> ExampleIndex:
    """Return the (cached) index of ``template``'s examples, keyed by name, version and timestamp."""
    key = (template.name, template.version, template.updated_at, len(template.examples))
    index = _INDEX_CACHE.get(key)
    if index is None:
        index = ExampleIndex(template.examples)
        _INDEX_CACHE[key] = index
        while len(_INDEX_CACHE) > _INDEX_CACHE_SIZE:
            _INDEX_CACHE.popitem(last=False)
    else:
        _INDEX_CACHE.move_to_end(key)
    return index


def _round_robin(order: list[int], examples: Sequence[Example]) -> list[int]:
    # Group by tool keeping each group's order; tools ordered by their best member's position.
    groups: dict[str, list[int]] = defaultdict(list)
    for i in order:
        groups[examples[i].tool_name].append(i)
    queues = list(groups.values())
    result: list[int] = []
    depth = 0
    while len(result) < len(order):
        for queue in queues:
            if depth < len(queue):
                result.append(queue[depth])
        depth += 1
    return result


def rank_examples(
    examples: Sequence[Example],
    task: str,
    *,
    index: ExampleIndex | None = None,
    include_failed: bool = False,
) -> list[int]:
    """Return example indices, best first: relevant ones (diverse across tools), then the rest.

    Relevance is BM25 of the task text against each example's context, tool and arguments; ties
    and irrelevant examples go by how often the call was seen. Failed examples are left out
    unless ``include_failed``.
    """
    if not examples:
        return []
    scores = (index or ExampleIndex(examples)).scores(task)
    counts = np.fromiter(
        (math.log1p(max(e.count, 1)) for e in examples), dtype=np.float64, count=len(examples)
    )
    usable = [i for i, e in enumerate(examples) if include_failed or e.outcome is not OutcomeStatus.FAILED]
    relevant = [i for i in usable if scores[i] > 0]
    rest = [i for i in usable if scores[i] <= 0]
    # A tiny frequency prior breaks BM25 ties without overriding relevance.
    relevant.sort(key=lambda i: (-(float(scores[i]) + 1e-3 * counts[i]), i))
    rest.sort(key=lambda i: (-counts[i], i))
    return _round_robin(relevant, examples) + _round_robin(rest, examples)


@dataclass
class Selection:
    """Examples chosen for a task, in order, with the per-example token share used to render them."""

    examples: list[Example]
    result_tokens: int
    system_prompt: str | None


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
    """Return the examples to inject for ``task``: ranked, diverse, filling at most ``budget`` tokens.

    ``order`` overrides the ranking (used by the benchmark's baselines). Each result is truncated
    to ``budget / max_examples`` tokens (a per-example share). Raises ConversationError for an
    unknown style.
    """
    chosen_style = check_style(style)
    ranking = list(order) if order is not None else rank_examples(examples, task, index=index)
    remaining = budget
    system = system_message(system_prompt or "", budget)
    if system is not None:
        remaining -= estimate_message_tokens(system)
    slots = max(1, min(max_examples, len(ranking)))
    share = max(16, remaining // slots)
    chosen: list[Example] = []
    misses = 0
    for i in ranking:
        if len(chosen) >= max_examples or remaining < _SMALLEST_EXAMPLE or misses >= _GIVE_UP_AFTER:
            break
        example = examples[i]
        # The id is a placeholder of the same length as the one build_conversation will use.
        rendered = render_example(
            example, tool_call_id("kw00000000", len(chosen)), style=chosen_style, result_tokens=share
        )
        cost = sum(estimate_message_tokens(m) for m in rendered)
        if cost > remaining:
            misses += 1
            continue
        misses = 0
        remaining -= cost
        chosen.append(example)
    return Selection(chosen, share, system["content"] if system else None)


def _tag_overlap(template: Template, task_tokens: set[str]) -> int:
    return sum(1 for tag in template.tags if set(tokenize(tag)) & task_tokens)


def choose_template(templates: Sequence[Template], task: str) -> Template | None:
    """Return the template that fits ``task`` best, or None when no template has examples.

    Order: same task type as the task text (``mixed``/untyped next, other types last), then more
    tags named in the task, then least used, then name.
    """
    from kindling.mining import classify_task_text

    candidates = [t for t in templates if t.examples]
    if not candidates:
        return None
    task_type = str(getattr(classify_task_text(task), "value", "mixed"))
    task_tokens = set(tokenize(task))

    def type_rank(template: Template) -> int:
        if template.task_type == task_type:
            return 0
        if template.task_type in (None, "mixed"):
            return 1
        return 2

    return min(
        candidates,
        key=lambda t: (type_rank(t), -_tag_overlap(t, task_tokens), t.usage_count, t.name),
    )
