"""Split past sessions into folds by task, so no task is on both sides of an evaluation.

Two sessions are the same task when a benchmark says so (the same ``task_id`` of the same
benchmark: tau-bench and tau2-bench runs) or when their task texts are near-duplicates (the
benchmark's instruction where there is one, else the opening request; word sets whose Jaccard
similarity reaches ``threshold``). Tasks are the connected groups of that relation, so a task run
three times, or retold in two benchmarks, stays on one side. Groups are dealt to folds at random
(seeded), largest first, each to the fold with the fewest sessions so far.

Near-duplicates are found with prefix filtering (an exact similarity join): words are ordered
rarest first, and two sets can reach the threshold only if their short prefixes share a word, so
only those pairs are compared. Thousands of sessions cost a fraction of a second.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from kindling.mining.tasktype import opening_request
from kindling.sessions.model import Session

__all__ = ["DEFAULT_FOLDS", "DEFAULT_SIMILARITY", "Split", "split_by_task", "task_groups", "task_text"]

DEFAULT_FOLDS = 5
DEFAULT_SIMILARITY = 0.6
_WORD = re.compile(r"[a-z0-9]+")
_INSTRUCTION_KEYS = ("instruction", "task_instruction")


def task_text(session: Session) -> str:
    """Return what a session was asked to do: its benchmark instruction, else its opening request."""
    for key in _INSTRUCTION_KEYS:
        value = session.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return opening_request(session)


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) > 1)


def _task_key(session: Session) -> str | None:
    task_id = session.metadata.get("task_id")
    if task_id is None or str(task_id) == "":
        return None
    benchmark = session.metadata.get("benchmark") or session.source or ""
    return f"{benchmark}\0{task_id}"


class _Groups:
    """Union-find over session positions."""

    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, item: int) -> int:
        root = item
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[item] != root:
            self.parent[item], item = root, self.parent[item]
        return root

    def join(self, first: int, second: int) -> None:
        a, b = self.find(first), self.find(second)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def _similar_pairs(sets: Sequence[frozenset[str]], threshold: float) -> list[tuple[int, int]]:
    """Pairs (i, j) whose word sets have a Jaccard similarity of at least ``threshold``."""
    frequency = Counter(word for words in sets for word in words)
    ordered = [sorted(words, key=lambda w: (frequency[w], w)) for words in sets]
    index: dict[str, list[int]] = defaultdict(list)
    pairs: list[tuple[int, int]] = []
    # Shorter sets first: a set then meets in the index only sets no longer than itself.
    for i in sorted(range(len(sets)), key=lambda k: len(ordered[k])):
        words = ordered[i]
        if not words:
            continue
        prefix = len(words) - math.ceil(threshold * len(words)) + 1
        candidates: set[int] = set()
        for word in words[:prefix]:
            candidates.update(index[word])
        for j in candidates:
            other = sets[j]
            if len(other) < threshold * len(words):
                continue
            shared = len(sets[i] & other)
            if shared / (len(sets[i]) + len(other) - shared) >= threshold:
                pairs.append((min(i, j), max(i, j)))
        for word in words[:prefix]:
            index[word].append(i)
    return pairs


def task_groups(sessions: Sequence[Session], *, threshold: float = DEFAULT_SIMILARITY) -> list[int]:
    """Return one task-group number per session (0, 1, ... in order of first appearance).

    Sessions share a group when they have the same benchmark task id, or, transitively, when their
    task texts reach ``threshold`` word similarity. A session without a task text or an id is a
    group of its own.
    """
    groups = _Groups(len(sessions))
    first_of_key: dict[str, int] = {}
    for position, session in enumerate(sessions):
        key = _task_key(session)
        if key is not None:
            groups.join(first_of_key.setdefault(key, position), position)
    texts = [_words(task_text(session)) for session in sessions]
    for first, second in _similar_pairs(texts, threshold):
        groups.join(first, second)
    numbers: dict[int, int] = {}
    return [numbers.setdefault(groups.find(i), len(numbers)) for i in range(len(sessions))]


@dataclass(frozen=True)
class Split:
    """Sessions dealt to folds by task: ``fold[i]`` and ``group[i]`` belong to the i-th session."""

    fold: list[int]
    group: list[int]
    folds: int

    @property
    def tasks(self) -> int:
        """How many distinct tasks (groups) there are."""
        return len(set(self.group))

    def held_out(self, fold: int) -> list[int]:
        """Positions of the sessions in ``fold``."""
        return [i for i, f in enumerate(self.fold) if f == fold]

    def training(self, fold: int) -> list[int]:
        """Positions of the sessions outside ``fold`` (its training side)."""
        return [i for i, f in enumerate(self.fold) if f != fold]


def split_by_task(
    sessions: Sequence[Session],
    *,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    threshold: float = DEFAULT_SIMILARITY,
) -> Split:
    """Deal ``sessions`` to ``folds`` folds so that every task (see ``task_groups``) is in one fold.

    Deterministic for a seed. Raises ValueError when ``folds`` is below 2 or ``threshold`` is not
    in (0, 1].
    """
    if folds < 2:
        raise ValueError(f"an evaluation needs at least 2 folds, not {folds}")
    if not 0 < threshold <= 1:
        raise ValueError(f"the similarity threshold must be in (0, 1], not {threshold}")
    group = task_groups(sessions, threshold=threshold)
    sizes = Counter(group)
    order = list(sizes)
    random.Random(seed).shuffle(order)
    order.sort(key=lambda g: -sizes[g])  # stable: equal sizes keep their shuffled order
    load = [0] * folds
    fold_of: dict[int, int] = {}
    for g in order:
        target = min(range(folds), key=lambda f: (load[f], f))
        fold_of[g] = target
        load[target] += sizes[g]
    return Split([fold_of[g] for g in group], group, folds)
