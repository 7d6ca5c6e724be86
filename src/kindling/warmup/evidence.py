"""What a template's past tasks say about a new task: similar episodes and the tools it will need.

Everything is learned from the template's own episodes (its successful past tasks), nothing from
fixed keyword lists:

- **What a past task is known by**: its request (the benchmark's instruction where the source has
  one) and its opening message (what its user said at turn zero), so a new task described either
  way finds it.
- **Similar past tasks**: TF-IDF cosine similarity between the new task's text and each episode's.
- **Per-tool evidence**: for every tool, a logistic model over the stemmed words of the episodes'
  texts predicts whether a task with this text uses the tool. It learns both the tool's base rate
  (tools nearly every task needs) and the words that go with it ("return", "refund", "address"),
  and it shares strength across all episodes instead of voting with a few. The ridge is weak, so a
  telling word carries its weight even in a long request.
- **A task's tools, not a run's**: when several past runs did the same task (the same task id),
  each learns the tools most of them used, so one run's detour (a lookup another agent skipped)
  does not teach that the task needs it.
- **How many tools, how many examples**: the tools are ranked by probability and the warm-up
  with the best expected F-score is shown (``choose_tools``): the likeliest tools once each and
  the surest one repeated, so a task that needs two tools does not get eight, and spare slots do
  not go to doubtful tools. When nothing in the task is known, the probabilities are the base rates.
- **What a user gave**: a placeholder the scrubber left (``<reservation_id_1>``) is one feature
  naming its kind, so "the user gave a reservation id" is told apart from talk of a reservation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kindling.templates.model import Episode
from kindling.templates.words import MAX_TRAINING, episode_text, features, words

if TYPE_CHECKING:
    from kindling.warmup.query import Query

__all__ = ["Choice", "TaskEvidence", "choose_tools", "features", "list_f1", "model_list", "words"]

# How past tasks and new tasks are read into words lives with the templates (their summaries for
# choosing read them the same way); the names stay importable from here.

L2 = 0.1  # ridge strength of the per-tool models: weak, so one telling word in a long request counts
_ITERATIONS = 300
_STEP = 2.0
_CONVERGED = 1e-4  # stop once no weight moves more than this in a step
RECALL_WEIGHT = 1.5  # F-beta's beta in choose_tools: recall counts more than precision
MIN_DOCUMENT_FREQUENCY = 2  # a word seen in one past task only says nothing general
MAX_VOCABULARY = 20000
TRUST_FOLDS = 3  # folds by task that judge the word models against the general list
TRUST_ROWS = 300  # the newest past tasks they are judged on: enough to judge, and a first warm-up stays quick


def _task_key(episode: Episode, index: int) -> str:
    """The task an episode ran: its task id, else itself alone."""
    return f"task:{episode.task_id}" if episode.task_id is not None else f"run:{index}"


def _task_tools(episodes: Sequence[Episode]) -> list[set[str]]:
    """Return per episode the tools its task needs: those most runs of the same task used.

    Runs are the same task when they share a task id; an episode without one is its own task.
    """
    runs: dict[str, list[int]] = {}
    for index, episode in enumerate(episodes):
        key = f"task:{episode.task_id}" if episode.task_id is not None else f"run:{index}"
        runs.setdefault(key, []).append(index)
    needed: list[set[str]] = [set() for _ in episodes]
    for members in runs.values():
        counts = Counter(tool for i in members for tool in episodes[i].tools)
        majority = {tool for tool, count in counts.items() if 2 * count >= len(members)}
        for i in members:
            needed[i] = majority
    return needed


@dataclass(frozen=True)
class Similar:
    """One past task and how similar its opening request is to the new task (cosine, 0-1)."""

    index: int
    similarity: float


class TaskEvidence:
    """Similarity and per-tool models over one template's episodes (built once, then cached)."""

    def __init__(self, episodes: Sequence[Episode]) -> None:
        self.episodes = list(episodes)
        # What a warm-up shows above an episode's calls: its opening message (else its request).
        self.openings = {e.session_id: e.opening or e.request for e in self.episodes}
        texts = [episode_text(e) for e in self.episodes]
        word_lists = [words(t) for t in texts]  # read once: the features are their distinct words
        feats = [set(ws) for ws in word_lists]
        df = Counter(f for fs in feats for f in fs)
        kept = sorted((f for f, c in df.items() if c >= MIN_DOCUMENT_FREQUENCY), key=lambda f: (-df[f], f))
        self.vocabulary = {f: i for i, f in enumerate(kept[:MAX_VOCABULARY])}
        self.tools = sorted({t for e in self.episodes for t in e.tools})
        train = range(max(0, len(self.episodes) - MAX_TRAINING), len(self.episodes))
        feats = [feats[i] for i in train]
        n = len(train)
        # The design matrix is sparse (a request has a few dozen features): rows as index lists.
        self._rows = [sorted({self.vocabulary[f] for f in fs if f in self.vocabulary}) for fs in feats]
        self._train = list(train)
        x = _design(self._rows, len(self.vocabulary))
        y = np.zeros((n, len(self.tools)), dtype=np.float64)
        column_of = {t: i for i, t in enumerate(self.tools)}
        needed = _task_tools(self.episodes)
        # What every past task needed, as rows of a 0/1 matrix over the tools: the general list is
        # learned from it, and candidate lists are scored against it.
        self.truth = np.zeros((len(self.episodes), len(self.tools)), dtype=np.float64)
        for episode_index, tools_needed in enumerate(needed):
            for tool in tools_needed:
                self.truth[episode_index, column_of[tool]] = 1.0
        self._general: dict[tuple[Any, ...], list[str]] = {}
        # A past task counts once however many runs of it there are: each run weighs 1/runs.
        runs_of = Counter(_task_key(e, i) for i, e in enumerate(self.episodes))
        self.task_weight = np.array(
            [1.0 / runs_of[_task_key(e, i)] for i, e in enumerate(self.episodes)], dtype=np.float64
        )
        for row_index, episode_index in enumerate(train):
            for tool in needed[episode_index]:
                y[row_index, column_of[tool]] = 1.0
        self.weights, self.bias = _fit_logistic(x, y)
        self._y = y
        self._trust: dict[tuple[Any, ...], float] = {}
        self._held_out: np.ndarray | None = None
        self._fold_models: list[tuple[np.ndarray, np.ndarray]] = []
        # TF-IDF over words for similarity between tasks.
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

    def similar(self, task: str | Query, limit: int = 20) -> list[Similar]:
        """Return up to ``limit`` episodes with a positive similarity to ``task``, most similar first
        (ties by episode order). A ``Query`` is read by its (scrubbed) words, text is split here."""
        query = self._tfidf(words(task) if isinstance(task, str) else list(task.words))
        if not query:
            return []
        totals: dict[int, float] = {}
        for w, weight in query.items():
            for index, value in self.postings.get(w, ()):
                totals[index] = totals.get(index, 0.0) + weight * value
        scored = [Similar(index, score) for index, score in totals.items() if score > 0]
        scored.sort(key=lambda s: (-s.similarity, s.index))
        return scored[:limit]

    def known(self, task: str | Query) -> bool:
        """True when ``task`` shares at least one feature with the past tasks' requests."""
        return any(f in self.vocabulary for f in _features_of(task))

    def probabilities(
        self, task: str | Query, allowed: Collection[str] | None = None, *, judged: bool = False
    ) -> dict[str, float]:
        """Return, per tool the past tasks used (and ``allowed`` permits), the probability that
        ``task`` needs it. Unknown words leave the base rates. ``judged``: the mean of the models
        that were judged against the general list (``trust``), whose claims its threshold is for.
        """
        x = np.zeros(len(self.vocabulary), dtype=np.float64)
        for f in _features_of(task):
            column = self.vocabulary.get(f)
            if column is not None:
                x[column] = 1.0
        x /= max(1.0, math.sqrt(float(x.sum())))
        if judged:
            self._out_of_fold()  # fits the judged models, once
        if judged and self._fold_models:
            p = np.mean([1.0 / (1.0 + np.exp(-(x @ w + b))) for w, b in self._fold_models], axis=0)
        else:
            z = x @ self.weights + self.bias if len(self.tools) else np.zeros(0)
            p = 1.0 / (1.0 + np.exp(-z))
        return {t: float(p[i]) for i, t in enumerate(self.tools) if allowed is None or t in allowed}

    def general_list(self, slots: int, available: Mapping[str, int] | None = None) -> list[str]:
        """Return the one list of tools (a tool may repeat) that serves the past tasks best: the
        highest mean F-score over every past task, whatever it asked, with at most ``slots``
        examples. Recall weighs ``RECALL_WEIGHT`` as in ``choose_tools``: a fallback that shows one
        tool many times would leave out tools a task needs as often as a choice that shows too many.

        Built greedily (each step adds the tool that raises the mean most, and it stops when none
        does); ``available`` caps each tool's repeats at the examples it has (a tool missing from
        it has none). Cached per setting: a template's evidence is built once per version.
        """
        key = (slots, None if available is None else tuple(sorted(available.items())))
        found = self._general.get(key)
        if found is not None:
            return list(found)
        cap = np.array(
            [slots if available is None else available.get(t, 0) for t in self.tools], dtype=np.int64
        )
        order = np.argsort(-self.truth.sum(axis=0), kind="stable")  # ties: the tool more tasks need
        counts = np.zeros(len(self.tools), dtype=np.float64)
        chosen: list[str] = []
        best = 0.0
        for _ in range(max(0, slots)):
            trials = [column for column in order if counts[column] < cap[column]]
            if not trials:
                break
            lists = np.repeat(counts[None, :], len(trials), axis=0)
            lists[np.arange(len(trials)), trials] += 1.0
            scores = list_f1(lists, self.truth, slots, beta=RECALL_WEIGHT) @ self.task_weight
            pick = int(np.argmax(scores))
            if scores[pick] <= best + 1e-12:
                break
            best = float(scores[pick])
            counts[trials[pick]] += 1.0
            chosen.append(self.tools[trials[pick]])
        self._general[key] = chosen
        return list(chosen)

    def _judged(self) -> np.ndarray:
        """The training rows the word models are judged on: the newest ``TRUST_ROWS``."""
        return np.arange(max(0, len(self._train) - TRUST_ROWS), len(self._train))

    def _out_of_fold(self) -> np.ndarray:
        """Return, per judged training row (``_judged``), the tool probabilities of models that
        never saw its task.

        The rows are split by task (runs of one task stay together) into ``TRUST_FOLDS`` folds; each
        fold is predicted by word models fitted on the others, as the real models are fitted.
        """
        if self._held_out is not None:
            return self._held_out
        judged = self._judged()
        keys = [_task_key(self.episodes[self._train[row]], self._train[row]) for row in judged]
        fold_of_key = {key: index % TRUST_FOLDS for index, key in enumerate(dict.fromkeys(keys))}
        folds = np.array([fold_of_key[key] for key in keys], dtype=np.int64)
        held_out = np.zeros((len(judged), len(self.tools)))
        for fold in range(TRUST_FOLDS):
            inside = judged[folds != fold]
            outside = np.flatnonzero(folds == fold)
            if not len(outside) or not len(inside):
                held_out[outside] = self._y.mean(axis=0) if len(self._y) else 0.0
                continue
            weights, bias = _fit_logistic(
                _design([self._rows[i] for i in inside], len(self.vocabulary)), self._y[inside]
            )
            self._fold_models.append((weights, bias))
            z = _design([self._rows[i] for i in judged[outside]], len(self.vocabulary)).dot(weights) + bias
            held_out[outside] = 1.0 / (1.0 + np.exp(-z))
        self._held_out = held_out
        return held_out

    def trust(self, slots: int, available: Mapping[str, int]) -> float:
        """Return how much expected gain the word models must claim before their choice is shown
        instead of the general list: learned on the past tasks themselves, each judged by models
        that never saw it (``_out_of_fold``).

        For every past task the models' choice (``choose_tools``) and the general list are scored
        against what it needed; the threshold keeps the models' choice exactly where, in order of
        the gain they claimed, it did better in sum. Where it never did, the threshold is infinite
        and the general list always shows: never worse than that list, on the past tasks' record.
        """
        key = (slots, tuple(sorted(available.items())))
        found = self._trust.get(key)
        if found is not None:
            return found
        general = self.general_list(slots, available)
        probabilities = self._out_of_fold()
        claimed: list[float] = []
        gained: list[float] = []
        episodes = np.asarray(self._train, dtype=np.int64)[self._judged()]
        truth = self.truth[episodes]
        weight = self.task_weight[episodes]
        for row, p in enumerate(probabilities):
            if not truth[row].any():
                continue
            odds = {t: float(p[i]) for i, t in enumerate(self.tools) if available.get(t, 0) > 0}
            shown = model_list(odds, slots, available)
            lists = self.counts([shown, general])
            claimed.append(float(np.subtract(*self.expected_f1(lists, odds, slots))))
            real = list_f1(lists, truth[row][None, :], slots)[:, 0]
            gained.append(float(real[0] - real[1]) * weight[row])
        threshold = math.inf
        if claimed:
            order = np.argsort(-np.asarray(claimed), kind="stable")
            total = np.cumsum(np.asarray(gained)[order])
            best = int(np.argmax(total))
            if total[best] > 1e-9:
                # Between the last task kept and the next: the models' choice where they claim more.
                # Where it did better on every past task, it shows wherever it claims any gain.
                cut = [claimed[i] for i in order]
                threshold = (
                    (cut[best] + cut[best + 1]) / 2 if best + 1 < len(cut) else min(0.0, cut[best] - 1e-9)
                )
        self._trust[key] = threshold
        return threshold

    def counts(self, lists: Sequence[Sequence[str]]) -> np.ndarray:
        """Return ``lists`` as rows of examples per tool (tools the past tasks never used drop out)."""
        column_of = {t: i for i, t in enumerate(self.tools)}
        matrix = np.zeros((len(lists), len(self.tools)), dtype=np.float64)
        for row, tools in enumerate(lists):
            for tool in tools:
                column = column_of.get(tool)
                if column is not None:
                    matrix[row, column] += 1.0
        return matrix

    def expected_f1(self, lists: np.ndarray, probabilities: Mapping[str, float], slots: int) -> np.ndarray:
        """Return each list's expected F1 when each tool is needed with its probability, independently."""
        p = np.array([probabilities.get(t, 0.0) for t in self.tools], dtype=np.float64)
        return np.array([_expected_list_f1(row, p, slots) for row in lists])


def model_list(probabilities: Mapping[str, float], slots: int, available: Mapping[str, int]) -> list[str]:
    """Return the tools of the examples the word models' choice shows (``choose_tools``): the chosen
    tools once each, then further examples of the surest, and when its run out of the next."""
    choice = choose_tools(dict(probabilities), slots, available)
    shown = list(choice.tools)
    for tool in choice.tools:
        spare = max(0, available.get(tool, 1) - 1)
        while spare and len(shown) < choice.examples:
            shown.append(tool)
            spare -= 1
    return shown


def _expected_list_f1(counts: np.ndarray, p: np.ndarray, slots: int) -> float:
    """Expected F1 of showing ``counts`` examples per tool when tool i is needed with ``p[i]``."""
    total = int(counts.sum())
    if total == 0:
        return 0.0
    shown = np.flatnonzero(counts > 0)
    # Joint distribution of (distinct shown tools needed, examples whose tool is needed).
    joint = np.zeros((len(shown) + 1, total + 1))
    joint[0, 0] = 1.0
    for column in shown:
        c = int(counts[column])
        moved = np.zeros_like(joint)
        moved[1:, c:] = joint[:-1, : total + 1 - c]
        joint = joint * (1.0 - p[column]) + moved * p[column]
    # How many tools not shown are needed, capped at ``slots``.
    beyond = [1.0] + [0.0] * slots
    for column in np.flatnonzero(counts == 0):
        beyond = _add_tool(beyond, float(p[column]))
    hits = np.arange(len(shown) + 1, dtype=np.float64)[:, None, None]
    correct = np.arange(total + 1, dtype=np.float64)[None, :, None]
    missing = np.arange(slots + 1, dtype=np.float64)[None, None, :]
    recall = np.divide(
        hits, np.minimum(hits + missing, slots), out=np.zeros((len(shown) + 1, 1, slots + 1)), where=hits > 0
    )
    precision = correct / total
    denominator = recall + precision
    f1 = np.divide(
        2 * recall * precision,
        denominator,
        out=np.zeros(np.broadcast_shapes(recall.shape, precision.shape)),
        where=denominator > 0,
    )
    return float((f1 * joint[:, :, None] * np.asarray(beyond)[None, None, :]).sum())


def _design(rows: Sequence[Sequence[int]], width: int) -> _Sparse:
    """Return the sparse design matrix of ``rows`` (each a row's feature columns), rows normalised."""
    indptr = [0]
    columns: list[int] = []
    values: list[float] = []
    for row in rows:
        columns.extend(row)
        values.extend([1.0 / max(1.0, math.sqrt(len(row)))] * len(row))
        indptr.append(len(columns))
    return _Sparse(
        np.asarray(indptr, dtype=np.int64), np.asarray(columns, dtype=np.int64), np.asarray(values), width
    )


def list_f1(
    lists: np.ndarray,
    truth: np.ndarray,
    slots: int,
    lengths: Sequence[int] | None = None,
    beta: float = 1.0,
) -> np.ndarray:
    """Return the F1 (F-beta with ``beta``) of each list (rows of ``lists``: examples per tool)
    against each task (rows of ``truth``: 0/1 per tool), as ``bench/selection.py`` scores a warm-up: recall is the share of
    the task's tools shown, out of at most ``slots``; precision the share of examples whose tool
    the task needs. ``lengths`` counts examples of tools ``truth`` does not know (never needed).
    A task that needs no tool scores 0 for every list.
    """
    shown = lists.sum(axis=1) if lengths is None else np.asarray(lengths, dtype=np.float64)
    hits = (lists > 0).astype(np.float64) @ truth.T
    correct = lists @ truth.T
    needed = np.minimum(truth.sum(axis=1), slots)[None, :]
    recall = np.divide(hits, needed, out=np.zeros_like(hits), where=needed > 0)
    precision = np.divide(correct, shown[:, None], out=np.zeros_like(correct), where=shown[:, None] > 0)
    weight = beta * beta
    total = weight * precision + recall
    return np.divide((1 + weight) * recall * precision, total, out=np.zeros_like(total), where=total > 0)


def _features_of(task: str | Query) -> Collection[str]:
    return features(task) if isinstance(task, str) else task.features


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
    """Fit one ridge-regularised logistic model per column of ``y`` (all at once).

    Accelerated gradient descent (Nesterov's momentum): the weak ridge lets words carry their
    weight, and momentum gets there in a few hundred steps where plain steps need thousands.
    """
    n, d = x.shape
    tools = y.shape[1]
    weights = np.zeros((d, tools))
    if n == 0 or tools == 0:
        return weights, np.zeros(tools)
    rate = np.clip(y.mean(axis=0), 1e-3, 1 - 1e-3)
    bias = np.log(rate / (1 - rate))
    previous_weights, previous_bias = weights, bias
    for k in range(_ITERATIONS):
        momentum = k / (k + 3)
        ahead_weights = weights + momentum * (weights - previous_weights)
        ahead_bias = bias + momentum * (bias - previous_bias)
        error = 1.0 / (1.0 + np.exp(-(x.dot(ahead_weights) + ahead_bias))) - y
        previous_weights, previous_bias = weights, bias
        weights = ahead_weights - _STEP * (x.tdot(error) + L2 * ahead_weights) / n
        bias = ahead_bias - _STEP * error.mean(axis=0) / 2
        if float(np.abs(weights - previous_weights).max(initial=0.0)) < _CONVERGED:
            break
    return weights, bias


@dataclass(frozen=True)
class Choice:
    """What a warm-up shows: these tools (most probable first) in this many examples in all."""

    tools: list[str]
    examples: int


def choose_tools(
    probabilities: dict[str, float], slots: int, available: Mapping[str, int] | None = None
) -> Choice:
    """Return the tools to show and how many examples: the best expected F-score under the models.

    The candidates are the ``k`` most probable tools shown once each, plus ``n - k`` more examples
    of the surest ones, for every ``k <= n <= slots``: the surest tool's, and when its examples run
    out the next surest's (``available``, when given, says how many examples each tool has; ``n``
    is never more than the ``k`` tools have between them). Each is scored by its expected F-beta
    when each tool is needed with its probability, independently: recall is the share of the needed
    tools shown (out of at most ``slots``), precision the share of examples whose tool is needed
    (``_expected_f``, which counts every further example as the surest tool's: exact while it has
    enough, an upper bound when they spill over to the next). Weak evidence adds no tool, and a
    further example is shown only while it raises the expected score. ``RECALL_WEIGHT`` (beta)
    leans towards recall: a tool the task needs and the agent was not shown costs more than an
    example too many. Ties go by tool name, then to fewer examples.
    """
    ranked = sorted(probabilities.items(), key=lambda kv: (-kv[1], kv[0]))
    ranked = [(t, min(max(p, 0.0), 1.0)) for t, p in ranked]
    if not ranked or slots < 1:
        return Choice([], 0)
    # Distribution of how many of the tools from position i on are needed, capped at ``slots``.
    beyond = [[1.0] + [0.0] * slots]
    for _tool, p in reversed(ranked):
        beyond.append(_add_tool(beyond[-1], p))
    beyond.reverse()
    best = (-1.0, 1, 1)
    among = [1.0]  # how many of ranked[1:k] are needed
    # Further examples: the surest tool's, then (when they run out) each next tool's, in rank order.
    own = slots if available is None else max(1, available.get(ranked[0][0], 1)) - 1
    spill: list[float] = []  # the probability of each further example past the surest tool's own
    for k in range(1, min(slots, len(ranked)) + 1):
        if k > 1:
            among = _add_tool(among, ranked[k - 1][1], cap=k)
            if available is not None:
                spill.extend([ranked[k - 1][1]] * (max(1, available.get(ranked[k - 1][0], 1)) - 1))
        most = min(slots, k + own + len(spill))
        scores = _expected_f(ranked[0][1], among, beyond[k], k, most, slots, own, spill)
        n = int(np.argmax(scores))  # the first best: ties go to fewer examples
        if scores[n] > best[0] + 1e-12:
            best = (float(scores[n]), k, k + n)
    return Choice([t for t, _p in ranked[: best[1]]], best[2])


def _add_tool(distribution: list[float], p: float, cap: int | None = None) -> list[float]:
    """Return the count distribution after one more tool needed with probability ``p``
    (counts at or above the last index are lumped into it unless ``cap`` grows the list)."""
    if cap is not None and len(distribution) < cap:
        distribution = [*distribution, 0.0]
    out = [q * (1.0 - p) for q in distribution]
    for m in range(len(distribution) - 1):
        out[m + 1] += distribution[m] * p
    out[-1] += distribution[-1] * p
    return out


def _expected_f(
    first: float,
    among: list[float],
    beyond: list[float],
    k: int,
    most: int,
    slots: int,
    own: int | None = None,
    spill: Sequence[float] = (),
) -> np.ndarray:
    """Expected F-beta of showing the ``k`` most probable tools once each and ``n - k`` further
    examples, for each ``n`` from ``k`` to ``most``.

    ``first`` is the surest tool's probability, ``among`` the distribution of how many of the other
    shown tools are needed and ``beyond`` of how many tools not shown are (capped at ``slots``).
    The first ``own`` further examples (all, when None) are the surest tool's; past those, each is
    of another shown tool, needed with its probability in ``spill``. Those count by their expected
    hits (their tools' needs are not followed jointly with recall): exact up to ``own``.
    """
    weight = RECALL_WEIGHT * RECALL_WEIGHT
    # Every outcome: is the surest tool needed (a), how many others shown are (h), how many not shown are (m).
    a = np.array([1.0, 0.0])[:, None, None]
    h = np.arange(len(among), dtype=np.float64)[None, :, None]
    m = np.arange(len(beyond), dtype=np.float64)[None, None, :]
    chance = (
        np.array([first, 1.0 - first])[:, None, None]
        * np.asarray(among)[None, :, None]
        * np.asarray(beyond)[None, None, :]
    )
    hits = a + h
    recall = np.divide(hits, np.minimum(hits + m, slots), out=np.zeros_like(chance), where=hits > 0)
    counts = np.arange(k, most + 1)
    further = counts - k
    surest = further if own is None else np.minimum(further, own)
    expected = np.concatenate(([0.0], np.cumsum(np.asarray(spill, dtype=np.float64))))
    spilled = expected[np.minimum(further - surest, len(spill))]
    shown = counts.astype(np.float64)[:, None, None, None]
    precision = (h + a * (1.0 + surest[:, None, None, None]) + spilled[:, None, None, None]) / shown
    denominator = weight * precision + recall
    f = np.divide(
        (1 + weight) * precision * recall,
        denominator,
        out=np.zeros(np.broadcast_shapes(precision.shape, recall.shape)),
        where=denominator > 0,
    )
    return (f * chance).sum(axis=(1, 2, 3))
