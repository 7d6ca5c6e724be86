"""What a template's past tasks say about a new task: similar episodes and the tools it will need.

Everything is learned from the template's own episodes (its successful past tasks), nothing from
fixed keyword lists:

- **Similar past tasks**: TF-IDF cosine similarity between the new task's text and each episode's
  opening request.
- **Per-tool evidence**: for every tool, a logistic model over the words of the episodes' requests
  (stemmed words and word pairs) predicts whether a task with this text uses the tool. It learns
  both the tool's base rate (tools nearly every task needs) and the words that go with it ("return",
  "refund", "address"), and it shares strength across all episodes instead of voting with a few.
- **Nearest past tasks vote**: the similarity-weighted share of the ten most similar past tasks
  that used each tool (smoothed towards the base rate); the probability of a tool is the mean of
  the word model's and the vote's.
- **How many tools**: the tools are ranked by probability and the smallest set with the best
  expected F1 is shown (``choose_tools``), so a task that needs two tools does not get eight; when
  nothing in the task is known, the probabilities fall back to the base rates.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from kindling.templates.model import Episode

__all__ = ["TaskEvidence", "choose_tools", "features", "words"]

_WORD_RE = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an and are as at be but by do for from has have how i if in into is it its me my of on or "  # noqa: SIM905
    "our please so that the their then there these this to up us was we what when where which "
    "with you your can could would should will hi hello hey im id like want need help just".split()
)
_SUFFIXES = ("ing", "ed", "es", "s")
L2 = 1.0  # ridge strength of the per-tool models (the usual default; not tuned to any data)
_ITERATIONS = 300
_STEP = 2.0
_CONVERGED = 1e-4  # stop once no weight moves more than this in a step
NEIGHBOURS = 10  # past tasks that vote
MAX_TRAINING = 1000  # the word models learn from the newest past tasks, so a first warm-up stays quick
MIN_DOCUMENT_FREQUENCY = 2  # a word seen in one past task only says nothing general
MAX_VOCABULARY = 20000


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def words(text: str) -> list[str]:
    """Return the stemmed content words of ``text``, in order."""
    return [_stem(w) for w in _WORD_RE.findall(text.lower()) if len(w) > 1 and w not in _STOPWORDS]


def features(text: str) -> set[str]:
    """Return the features of ``text``: its stemmed words and adjacent word pairs."""
    found = words(text)
    return set(found) | {f"{a}_{b}" for a, b in itertools.pairwise(found)}


def episode_text(episode: Episode) -> str:
    """The text an episode is known by: what its user said at turn zero (else its request)."""
    return episode.opening or episode.request


@dataclass(frozen=True)
class Similar:
    """One past task and how similar its opening request is to the new task (cosine, 0-1)."""

    index: int
    similarity: float


class TaskEvidence:
    """Similarity and per-tool models over one template's episodes (built once, then cached)."""

    def __init__(self, episodes: Sequence[Episode]) -> None:
        self.episodes = list(episodes)
        texts = [episode_text(e) for e in self.episodes]
        feats = [features(t) for t in texts]
        df = Counter(f for fs in feats for f in fs)
        kept = sorted((f for f, c in df.items() if c >= MIN_DOCUMENT_FREQUENCY), key=lambda f: (-df[f], f))
        self.vocabulary = {f: i for i, f in enumerate(kept[:MAX_VOCABULARY])}
        self.tools = sorted({t for e in self.episodes for t in e.tools})
        train = range(max(0, len(self.episodes) - MAX_TRAINING), len(self.episodes))
        feats = [feats[i] for i in train]
        n = len(train)
        # The design matrix is sparse (a request has a few dozen features): rows as index lists.
        indptr = [0]
        columns: list[int] = []
        values: list[float] = []
        for fs in feats:
            row = sorted({self.vocabulary[f] for f in fs if f in self.vocabulary})
            columns.extend(row)
            values.extend([1.0 / max(1.0, math.sqrt(len(row)))] * len(row))
            indptr.append(len(columns))
        x = _Sparse(
            np.asarray(indptr, dtype=np.int64),
            np.asarray(columns, dtype=np.int64),
            np.asarray(values),
            len(self.vocabulary),
        )
        y = np.zeros((n, len(self.tools)), dtype=np.float64)
        column_of = {t: i for i, t in enumerate(self.tools)}
        for row_index, episode_index in enumerate(train):
            for tool in self.episodes[episode_index].tools:
                y[row_index, column_of[tool]] = 1.0
        self.base_rates = y.mean(axis=0) if n else np.zeros(len(self.tools))
        self.weights, self.bias = _fit_logistic(x, y)
        # TF-IDF over words for similarity between tasks.
        word_lists = [words(t) for t in texts]
        wdf = Counter(w for ws in word_lists for w in set(ws))
        self.idf = {w: math.log((n + 1) / (c + 0.5)) for w, c in wdf.items()}
        self.vectors = [self._tfidf(ws) for ws in word_lists]
        self.postings: dict[str, list[tuple[int, float]]] = {}
        for index, vector in enumerate(self.vectors):
            for w, weight in vector.items():
                self.postings.setdefault(w, []).append((index, weight))

    def _tfidf(self, found: list[str]) -> dict[str, float]:
        counts = Counter(found)
        vector = {w: (1.0 + math.log(c)) * self.idf.get(w, 0.0) for w, c in counts.items()}
        norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
        return {w: v / norm for w, v in vector.items() if v}

    def similar(self, task: str, limit: int = 20) -> list[Similar]:
        """Return up to ``limit`` episodes with a positive similarity to ``task``, most similar first
        (ties by episode order)."""
        query = self._tfidf(words(task))
        if not query:
            return []
        totals: dict[int, float] = {}
        for w, weight in query.items():
            for index, value in self.postings.get(w, ()):
                totals[index] = totals.get(index, 0.0) + weight * value
        scored = [Similar(index, score) for index, score in totals.items() if score > 0]
        scored.sort(key=lambda s: (-s.similarity, s.index))
        return scored[:limit]

    def known(self, task: str) -> bool:
        """True when ``task`` shares at least one feature with the past tasks' requests."""
        return any(f in self.vocabulary for f in features(task))

    def probabilities(self, task: str, allowed: Collection[str] | None = None) -> dict[str, float]:
        """Return, per tool the past tasks used (and ``allowed`` permits), the probability that
        ``task`` needs it. Unknown words leave the base rates."""
        x = np.zeros(len(self.vocabulary), dtype=np.float64)
        for f in features(task):
            column = self.vocabulary.get(f)
            if column is not None:
                x[column] = 1.0
        x /= max(1.0, math.sqrt(float(x.sum())))
        z = x @ self.weights + self.bias if len(self.tools) else np.zeros(0)
        p = 1.0 / (1.0 + np.exp(-z))
        # The word models share strength across all past tasks; the vote of the nearest ones is
        # sharper when a few past tasks match closely. Each counts half.
        p = 0.5 * p + 0.5 * self.vote(task)
        return {t: float(p[i]) for i, t in enumerate(self.tools) if allowed is None or t in allowed}

    def vote(self, task: str) -> np.ndarray:
        """Return per tool the similarity-weighted share of the nearest past tasks that used it,
        smoothed towards the base rate by one pseudo-task (the base rates when nothing is similar)."""
        total = np.array(self.base_rates, dtype=np.float64)
        weight = 1.0
        column_of = {t: i for i, t in enumerate(self.tools)}
        for s in self.similar(task, NEIGHBOURS):
            for tool in self.episodes[s.index].tools:
                total[column_of[tool]] += s.similarity
            weight += s.similarity
        return total / weight


class _Sparse:
    """A sparse matrix with just what the gradient steps need: ``x @ w`` and ``x.T @ e``.

    Both are segment sums (``np.add.reduceat``) over the entries grouped by row, then by column.
    """

    def __init__(self, indptr: np.ndarray, columns: np.ndarray, values: np.ndarray, width: int) -> None:
        self.shape = (len(indptr) - 1, width)
        self.values = values
        self.columns = columns
        self.rows = np.repeat(np.arange(self.shape[0]), np.diff(indptr))
        self._row_starts, self._row_ids = _segments(self.rows)
        self._by_column = np.argsort(columns, kind="stable")
        self._column_starts, self._column_ids = _segments(columns[self._by_column])

    def dot(self, w: np.ndarray) -> np.ndarray:
        out = np.zeros((self.shape[0], w.shape[1]))
        if len(self.columns):
            out[self._row_ids] = np.add.reduceat(w[self.columns] * self.values[:, None], self._row_starts)
        return out

    def tdot(self, e: np.ndarray) -> np.ndarray:
        out = np.zeros((self.shape[1], e.shape[1]))
        if len(self.columns):
            order = self._by_column
            parts = e[self.rows[order]] * self.values[order, None]
            out[self._column_ids] = np.add.reduceat(parts, self._column_starts)
        return out


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (start of each run of equal keys, the key of each run) for sorted ``keys``."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return starts, keys[starts]


def _fit_logistic(x: _Sparse, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit one ridge-regularised logistic model per column of ``y`` (gradient descent, all at once)."""
    n, d = x.shape
    tools = y.shape[1]
    weights = np.zeros((d, tools))
    if n == 0 or tools == 0:
        return weights, np.zeros(tools)
    rate = np.clip(y.mean(axis=0), 1e-3, 1 - 1e-3)
    bias = np.log(rate / (1 - rate))
    for _ in range(_ITERATIONS):
        p = 1.0 / (1.0 + np.exp(-(x.dot(weights) + bias)))
        error = p - y
        step = _STEP * (x.tdot(error) + L2 * weights) / n
        weights -= step
        bias -= _STEP * error.mean(axis=0) / 2
        if float(np.abs(step).max(initial=0.0)) < _CONVERGED:
            break
    return weights, bias


def choose_tools(probabilities: dict[str, float], slots: int) -> list[str]:
    """Return the tools to show: the most probable first, as many as maximise the expected F1.

    With tools ranked by probability p, showing the top k gives an expected F1 of about
    2 * sum(p[:k]) / (k + min(sum(p), slots)) (recall counted against at most ``slots`` tools);
    the best k is taken, so weak evidence adds no tool. Ties go by tool name.
    """
    ranked = sorted(probabilities.items(), key=lambda kv: (-kv[1], kv[0]))
    expected = min(sum(probabilities.values()), float(slots))
    best: tuple[float, int] = (0.0, 0)
    total = 0.0
    for k, (_tool, p) in enumerate(ranked[:slots], start=1):
        total += p
        score = 2 * total / (k + expected) if k + expected else 0.0
        if score > best[0] + 1e-12:
            best = (score, k)
    return [tool for tool, _p in ranked[: best[1]]]
