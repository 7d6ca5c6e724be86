"""How a task's text is read into words: for the similarity of past tasks and the per-tool models.

Stemmed content words (a few suffixes cut, common words dropped), and a placeholder the scrubber
left ("<reservation_id_1>") as one word naming its kind ("reservation_id:given"). A template's
summary for choosing (``kindling.templates.index``) and the warm-up's models
(``kindling.warmup.evidence``) both read texts this way.
"""

from __future__ import annotations

import re

from kindling.templates.model import Episode

__all__ = ["MAX_TRAINING", "episode_text", "features", "words"]

MAX_TRAINING = 1000  # the word models learn from the newest past tasks, so a first warm-up stays quick
_WORD_RE = re.compile(r"[a-z0-9]+")
# A scrubbed value ("<reservation_id_1>", "<email_2>"): its kind is one feature, "reservation_id:given".
_PLACEHOLDER_RE = re.compile(r"<([a-z][a-z]*(?:_[a-z]+)*)_\d+>")
_STOPWORDS = frozenset(
    "a an and are as at be but by do for from has have how i if in into is it its me my of on or "  # noqa: SIM905
    "our please so that the their then there these this to up us was we what when where which "
    "with you your can could would should will hi hello hey im id like want need help just".split()
)
_SUFFIXES = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


# Content words to their stems, as met (stemming is most of the cost of reading past tasks, and
# their words repeat); the stopwords and one-letter words map to None. Bounded: cleared when full.
_STEMS: dict[str, str | None] = {}
_STEMS_SIZE = 200_000


def _stem_or_none(word: str) -> str | None:
    found = _STEMS.get(word, "")
    if found != "":
        return found
    stem = _stem(word) if len(word) > 1 and word not in _STOPWORDS else None
    if len(_STEMS) >= _STEMS_SIZE:
        _STEMS.clear()
    _STEMS[word] = stem
    return stem


def words(text: str) -> list[str]:
    """Return the stemmed content words of ``text``, in order, then the kinds of detail it gives.

    A placeholder the scrubber left ("<reservation_id_1>") is one word naming its kind
    ("reservation_id:given"): that the user gave a reservation id tells which tools the task needs,
    where its parts alone ("reservation", "1") read like any mention of a reservation.
    """
    text = text.lower()
    stems = _STEMS
    found = [
        stem
        for w in _WORD_RE.findall(_PLACEHOLDER_RE.sub(" ", text))
        if (stem := stems.get(w) if w in stems else _stem_or_none(w)) is not None
    ]
    if "<" in text:
        found.extend(f"{kind}:given" for kind in _PLACEHOLDER_RE.findall(text))
    return found


def features(text: str) -> set[str]:
    """Return the features of ``text``: its distinct stemmed words.

    Word pairs were tried and cost more than they told: they split a request's weight over twice
    as many features.
    """
    return set(words(text))


def episode_text(episode: Episode) -> str:
    """The text an episode is known by: its request and, when different, its opening message."""
    return "\n".join(dict.fromkeys(t for t in (episode.request, episode.opening) if t))
