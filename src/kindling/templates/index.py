"""What choosing a template needs, kept per template and looked up across all of them.

Choosing a template for a task (``warm()`` without a name) compares the task with each template's
past tasks: TF-IDF cosine similarity, and a template's fit is the mean of its three best
(``kindling.warmup.plan.template_fit``). That needs only the past tasks' word vectors, not the
per-tool word models a warm-up fits for the chosen template, so:

- ``TaskSummary`` is one template's compact summary: its words' IDF and, per word, the past tasks
  that hold it with their weights (an inverted index), plus the tools it has usable examples of.
  It is computed once per template version (cached in the process, keyed by name, version and
  content) and gives exactly the similarities ``TaskEvidence.similar`` gives.
- ``ChoiceIndex`` merges the summaries of every template in a store into one inverted index: the
  fits of all templates for a task cost a few array operations per word of the task, not a pass
  over the templates. It is rebuilt only when the set of templates (or a version) changes.

A template without past tasks (a legacy file) is summarised by its examples' distinct requests,
matched by the task's own words (those requests were never scrubbed).
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import orjson

from kindling.mining.model import OutcomeStatus
from kindling.templates.model import Episode, Template
from kindling.templates.words import MAX_TRAINING, episode_text, words


class Task(Protocol):
    """A new task as choosing reads it (``kindling.warmup.query.Query``): its scrubbed words, and
    its own words (read only when a legacy template is compared)."""

    @property
    def words(self) -> Sequence[str]: ...

    @property
    def raw_words(self) -> Sequence[str]: ...


__all__ = [
    "ChoiceIndex",
    "TaskSummary",
    "adopt_stored_summary",
    "choice_index",
    "stored_summary",
    "summary_of",
]

log = logging.getLogger(__name__)

FIT_TOP = 3  # a template's fit is the mean similarity of its three best-matching past tasks
SUMMARY_VERSION = 1  # bumped when the words or weights a summary holds are computed differently


@dataclass(frozen=True)
class TaskSummary:
    """One template's past tasks as choosing reads them.

    ``idf`` maps each word to its inverse document frequency; ``postings`` maps it to the past
    tasks (by index) that hold it and the word's weight in their normalised TF-IDF vectors.
    ``scrubbed`` says the past tasks are episodes (stored scrubbed, so a task is matched by its
    scrubbed words) rather than a legacy template's example requests. ``tools`` are the tools with
    a usable (not failed) example.
    """

    idf: dict[str, float]
    postings: dict[str, tuple[tuple[int, ...], tuple[float, ...]]]
    size: int
    scrubbed: bool
    tools: frozenset[str]

    @classmethod
    def of_texts(
        cls, texts: Sequence[str], *, training: int, scrubbed: bool, template: Template
    ) -> TaskSummary:
        """Summarise past tasks known by ``texts``; ``training`` is the count IDF is taken over
        (the models' training window, as ``TaskEvidence`` takes it)."""
        word_lists = [words(t) for t in texts]
        df = Counter(w for ws in word_lists for w in set(ws))
        idf = {w: math.log((training + 1) / (c + 0.5)) for w, c in df.items()}
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for index, found in enumerate(word_lists):
            for w, weight in _tfidf(found, idf).items():
                entry = postings.setdefault(w, ([], []))
                entry[0].append(index)
                entry[1].append(weight)
        tools = frozenset(e.tool_name for e in template.examples if e.outcome is not OutcomeStatus.FAILED)
        return cls(
            idf=idf,
            postings={w: (tuple(i), tuple(v)) for w, (i, v) in postings.items()},
            size=len(texts),
            scrubbed=scrubbed,
            tools=tools,
        )

    def similarities(self, found: Sequence[str]) -> list[float]:
        """The positive similarities of the past tasks to a task with words ``found``, highest first."""
        query = _tfidf(list(found), self.idf)
        if not query:
            return []
        totals: dict[int, float] = {}
        for w, weight in query.items():
            indices, values = self.postings.get(w, ((), ()))
            for index, value in zip(indices, values, strict=True):
                totals[index] = totals.get(index, 0.0) + weight * value
        return sorted((score for score in totals.values() if score > 0), reverse=True)

    def fit(self, query: Task) -> float:
        """The mean similarity of the task to the three most similar past tasks (0 when none)."""
        best = self.similarities(query.words if self.scrubbed else query.raw_words)[:FIT_TOP]
        return sum(best) / FIT_TOP if best else 0.0


def _tfidf(found: list[str], idf: dict[str, float]) -> dict[str, float]:
    # As TaskEvidence._tfidf: log-scaled counts times IDF, normalised; words without IDF dropped.
    counts = Counter(found)
    vector = {w: (1.0 + math.log(c)) * idf.get(w, 0.0) for w, c in counts.items()}
    norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
    return {w: v / norm for w, v in vector.items() if v}


def _texts(template: Template) -> tuple[list[str], bool]:
    """The texts a template's past tasks are known by, and whether they are (scrubbed) episodes."""
    if template.episodes:
        return [episode_text(e) for e in template.episodes], True
    # A legacy template: its examples' distinct requests, as pseudo past tasks (sorted, as
    # template_fit always ordered them).
    contexts = sorted(
        {e.context for e in template.examples if e.context and e.outcome is not OutcomeStatus.FAILED}
    )
    return [episode_text(Episode(session_id=str(i), opening=c)) for i, c in enumerate(contexts)], False


def _summarise(template: Template) -> TaskSummary:
    texts, scrubbed = _texts(template)
    return TaskSummary.of_texts(
        texts, training=min(len(texts), MAX_TRAINING), scrubbed=scrubbed, template=template
    )


_PROBE = "Hi, I'm returning <order_id_1>: the shipped boxes arrived broken; refunds? running tests."


def _signature(texts: Sequence[str], scrubbed: bool) -> str:
    """What a stored summary was made from: a digest of the texts, of how words are read (a probe
    sentence's words) and of the summary's version, so a change to either is made again."""
    head = f"{SUMMARY_VERSION}:{MAX_TRAINING}:{words(_PROBE)}:{scrubbed}:{len(texts)}"
    digest = hashlib.blake2b(head.encode(), digest_size=16)
    for text in texts:
        digest.update(len(text).to_bytes(8, "little"))
        digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def stored_summary(template: Template) -> str:
    """Return ``template``'s summary for choosing as the compact JSON text a store keeps with it.

    It names what it was made from (``_signature``), so a template whose past tasks changed, or a
    file edited by hand, is summarised again rather than trusted.
    """
    summary = summary_of(template)
    texts, scrubbed = _texts(template)
    return orjson.dumps(
        {
            "signature": _signature(texts, scrubbed),
            "size": summary.size,
            "idf": summary.idf,
            "postings": summary.postings,
        }
    ).decode("utf-8")


def adopt_stored_summary(template: Template, stored: Any) -> bool:
    """Take the summary a store kept with ``template`` (``stored_summary``'s text) instead of
    computing it; False (and nothing taken) when it is missing, malformed or of other past tasks."""
    if not isinstance(stored, str):
        return False
    try:
        data = orjson.loads(stored)
        texts, scrubbed = _texts(template)
        if not isinstance(data, dict) or data.get("signature") != _signature(texts, scrubbed):
            return False
        size = int(data["size"])
        idf = {str(w): float(v) for w, v in data["idf"].items()}
        postings = {
            str(w): (tuple(int(i) for i in indices), tuple(float(v) for v in values))
            for w, (indices, values) in data["postings"].items()
        }
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        log.info("The stored summary of template %r is unreadable; it is made again.", template.name)
        return False
    if size != len(texts) or any(len(i) != len(v) or (i and max(i) >= size) for i, v in postings.values()):
        return False
    tools = frozenset(e.tool_name for e in template.examples if e.outcome is not OutcomeStatus.FAILED)
    summary = TaskSummary(idf=idf, postings=postings, size=size, scrubbed=scrubbed, tools=tools)
    _remember_summary(template, summary)
    return True


_SUMMARIES: OrderedDict[tuple[Any, ...], TaskSummary] = OrderedDict()
_BY_OBJECT: OrderedDict[int, tuple[Template, int, int, int, TaskSummary]] = OrderedDict()
_SUMMARIES_SIZE = 1024
_OBJECTS_SIZE = 256
_LOCK = threading.Lock()


def _shape(template: Template) -> tuple[int, int, int]:
    return (len(template.episodes), len(template.examples), len(template.tags))


def _key(template: Template) -> tuple[Any, ...]:
    # Name and version identify stored templates; the fingerprint (everything the summary reads)
    # tells apart in-memory templates that share them.
    fingerprint = hash(
        (
            tuple((e.request, e.opening) for e in template.episodes),
            tuple((e.tool_name, e.context, e.outcome) for e in template.examples),
            tuple(template.tags),
        )
    )
    return (template.name, template.version, template.updated_at, _shape(template), fingerprint)


def _remember_summary(template: Template, summary: TaskSummary, key: tuple[Any, ...] | None = None) -> None:
    key = key if key is not None else _key(template)
    with _LOCK:
        _SUMMARIES[key] = summary
        _SUMMARIES.move_to_end(key)
        while len(_SUMMARIES) > _SUMMARIES_SIZE:
            _SUMMARIES.popitem(last=False)
        _BY_OBJECT[id(template)] = (template, *_shape(template), summary)
        _BY_OBJECT.move_to_end(id(template))
        while len(_BY_OBJECT) > _OBJECTS_SIZE:
            _BY_OBJECT.popitem(last=False)


def summary_of(template: Template) -> TaskSummary:
    """Return ``template``'s summary for choosing, computed once per version and content (cached;
    a store that kept one with the template hands it over when it reads the template)."""
    shape = _shape(template)
    with _LOCK:
        seen = _BY_OBJECT.get(id(template))
        if seen is not None and seen[0] is template and seen[1:4] == shape:
            _BY_OBJECT.move_to_end(id(template))
            return seen[4]
    key = _key(template)
    with _LOCK:
        found = _SUMMARIES.get(key)
    if found is None:
        found = _summarise(template)
    _remember_summary(template, found, key)
    return found


class _Postings:
    """The summaries of one kind (episodes or legacy requests) merged into one inverted index."""

    def __init__(self, members: Sequence[tuple[int, TaskSummary]]) -> None:
        self.templates = np.asarray([t for t, _s in members], dtype=np.int64)
        sizes = [s.size for _t, s in members]
        self.owner = np.repeat(np.arange(len(members), dtype=np.int64), sizes)
        self.total = sum(sizes)
        idf: dict[str, tuple[list[int], list[float]]] = {}
        postings: dict[str, tuple[list[int], list[float], list[int]]] = {}
        offset = 0
        for local, (_t, summary) in enumerate(members):
            for w, value in summary.idf.items():
                entry = idf.get(w)
                if entry is None:
                    entry = idf[w] = ([], [])
                entry[0].append(local)
                entry[1].append(value)
            for w, (indices, weights) in summary.postings.items():
                lists = postings.get(w)
                if lists is None:
                    lists = postings[w] = ([], [], [])
                lists[0].extend([i + offset for i in indices] if offset else indices)
                lists[1].extend(weights)
                lists[2].extend([local] * len(indices))
            offset += summary.size
        self.idf = {w: (np.array(t, dtype=np.int64), np.array(v)) for w, (t, v) in idf.items()}
        # Per word: the past tasks holding it, their weights, and where each one's template is
        # among the templates that know the word (its position in ``self.idf[w][0]``).
        self.postings = {
            w: (
                np.array(i, dtype=np.int64),
                np.array(v),
                np.searchsorted(self.idf[w][0], np.array(o, dtype=np.int64)),
            )
            for w, (i, v, o) in postings.items()
        }

    def fits(self, found: Sequence[str]) -> np.ndarray:
        """Per member, its fit to a task with words ``found`` (exactly ``TaskSummary.fit``'s)."""
        count = len(self.templates)
        fits = np.zeros(count)
        if not count or not found:
            return fits
        # The task's TF-IDF vector under each member's IDF, word by word in the order the words
        # first occur (the same sums in the same order as TaskSummary, so the same floats).
        norm2 = np.zeros(count)
        weighted: list[tuple[str, np.ndarray, np.ndarray]] = []
        for w, c in Counter(found).items():
            entry = self.idf.get(w)
            if entry is None:
                continue
            members, values = entry
            raw = (1.0 + math.log(c)) * values
            norm2[members] += raw * raw
            weighted.append((w, members, raw))
        if not weighted:
            return fits
        norm = np.sqrt(norm2)
        norm[norm == 0] = 1.0
        scores = np.zeros(self.total)
        for w, members, raw in weighted:
            posting = self.postings.get(w)
            if posting is not None:
                indices, weights, position = posting
                scores[indices] += (raw / norm[members])[position] * weights
        touched = np.flatnonzero(scores > 0)
        if not len(touched):
            return fits
        owners = self.owner[touched]
        values = scores[touched]
        order = np.lexsort((-values, owners))
        owners, values = owners[order], values[order]
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        rank = np.arange(len(owners)) - np.repeat(starts, np.diff(np.r_[starts, len(owners)]))
        keep = rank < FIT_TOP
        best = np.zeros((count, FIT_TOP))
        best[owners[keep], rank[keep]] = values[keep]
        total = best[:, 0]
        for column in range(1, FIT_TOP):
            total = total + best[:, column]
        fits = total / FIT_TOP
        return fits


class ChoiceIndex:
    """The summaries of a list of templates, merged: every template's fit to a task at once."""

    def __init__(self, templates: Sequence[Template]) -> None:
        self.summaries = [summary_of(t) for t in templates]
        scrubbed = [(i, s) for i, s in enumerate(self.summaries) if s.scrubbed]
        legacy = [(i, s) for i, s in enumerate(self.summaries) if not s.scrubbed]
        self._scrubbed = _Postings(scrubbed)
        self._legacy = _Postings(legacy)
        self.size = len(templates)
        self._usable: dict[frozenset[str] | None, list[int]] = {}

    def usable(self, tools: Collection[str] | None) -> list[int]:
        """The templates (by position) with a usable example of one of ``tools`` (None: of any tool)."""
        key = frozenset(tools) if tools is not None else None
        found = self._usable.get(key)
        if found is None:
            found = [
                i
                for i, s in enumerate(self.summaries)
                if s.tools and (key is None or not s.tools.isdisjoint(key))
            ]
            if len(self._usable) >= 64:
                self._usable.clear()
            self._usable[key] = found
        return found

    def fits(self, query: Task) -> np.ndarray:
        """Per template (in the order given), its fit to ``query``."""
        fits = np.zeros(self.size)
        if len(self._scrubbed.templates):
            fits[self._scrubbed.templates] = self._scrubbed.fits(query.words)
        if len(self._legacy.templates):
            fits[self._legacy.templates] = self._legacy.fits(query.raw_words)
        return fits


_INDEXES: OrderedDict[tuple[int, ...], ChoiceIndex] = OrderedDict()
_INDEXES_SIZE = 8


_BY_LIST: OrderedDict[int, tuple[Sequence[Template], int, ChoiceIndex]] = OrderedDict()


def choice_index(templates: Sequence[Template]) -> ChoiceIndex:
    """Return the (cached) ChoiceIndex of ``templates``: rebuilt only when one of them changes.

    The same list object again (a store hands out the same list while nothing changed) is found
    without looking at its templates.
    """
    with _LOCK:
        seen = _BY_LIST.get(id(templates))
        if seen is not None and seen[0] is templates and seen[1] == len(templates):
            _BY_LIST.move_to_end(id(templates))
            return seen[2]
    index = _choice_index(templates)
    with _LOCK:
        _BY_LIST[id(templates)] = (templates, len(templates), index)
        while len(_BY_LIST) > _INDEXES_SIZE:
            _BY_LIST.popitem(last=False)
    return index


def _choice_index(templates: Sequence[Template]) -> ChoiceIndex:
    summaries = tuple(id(summary_of(t)) for t in templates)
    with _LOCK:
        seen = _INDEXES.get(summaries)
        if seen is not None:
            _INDEXES.move_to_end(summaries)
            return seen
    index = ChoiceIndex(templates)
    with _LOCK:
        # The index holds the summaries, so their ids in the key are not reused while it is kept.
        _INDEXES[summaries] = index
        while len(_INDEXES) > _INDEXES_SIZE:
            _INDEXES.popitem(last=False)
    return index
