"""A new task as a warm-up reads it, parsed once: scrubbed text, words, features, task type.

Choosing a template compares the task with every template's past tasks, then planning compares it
again with the chosen one's; each step used to scrub and tokenize the task itself, so a warm-up
over N templates scrubbed it N+2 times. ``Query.parse`` does it once per warm-up and everything
downstream (``plan.choose_template``, ``plan.template_fit``, ``plan.plan_examples``,
``evidence.TaskEvidence``) reads the parts it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

__all__ = ["Query", "as_past_tasks_are_known", "as_query"]

_SCRUBBERS: dict[int, tuple[Any, Any]] = {}


def as_past_tasks_are_known(task: str) -> str:
    """Return ``task`` as the template's past tasks are stored: personal data as typed placeholders.

    Past requests were scrubbed when they were kept ("my email is <email_1>"), so the new task is
    scrubbed the same way before it is compared with them: the placeholder says what kind of detail
    the user gave (an e-mail, an order id), which tells which tools the task needs, and a raw
    address matches nothing. The text shown in the warm-up is not this one. A ``mining.json`` that
    cannot be read, or turns scrubbing off, leaves the task as it is (``kindling build`` reports it).
    """
    from kindling.errors import ConfigError
    from kindling.mining import load_mining_config
    from kindling.mining.personal import PersonalDataScrubber

    try:
        config = load_mining_config()
    except ConfigError:
        return task
    if not config.scrub_personal_data or not task:
        return task
    cached = _SCRUBBERS.get(id(config))
    if cached is None or cached[0] is not config:
        _SCRUBBERS.clear()
        cached = (config, PersonalDataScrubber.from_config(config))
        _SCRUBBERS[id(config)] = cached
    return str(cached[1].scrub_texts([task])[0])


@dataclass(frozen=True)
class Query:
    """One task, parsed once per warm-up.

    ``text`` is the task as given; ``scrubbed`` is it as past tasks are known (personal data as
    typed placeholders); ``words`` and ``features`` are the stemmed words of ``scrubbed`` that the
    similarity and the per-tool models read; ``tokens`` the plain tokens of ``text`` that tags and
    BM25 read; ``task_type`` what ``classify_task_text`` makes of ``text``.
    """

    text: str
    scrubbed: str
    words: tuple[str, ...]
    features: frozenset[str]
    tokens: tuple[str, ...]
    task_type: str

    @classmethod
    def parse(cls, task: str) -> Query:
        """Parse ``task``: scrub it once, split it into words once, classify it once."""
        from kindling.mining import classify_task_text
        from kindling.templates.words import words
        from kindling.warmup.select import tokenize

        scrubbed = as_past_tasks_are_known(task)
        found = tuple(words(scrubbed))
        return cls(
            text=task,
            scrubbed=scrubbed,
            words=found,
            features=frozenset(found),
            tokens=tuple(tokenize(task)),
            task_type=str(getattr(classify_task_text(task), "value", "mixed")),
        )

    @cached_property
    def raw_words(self) -> tuple[str, ...]:
        """The stemmed words of the unscrubbed text: what a legacy template's requests are matched by."""
        from kindling.templates.words import words

        return tuple(words(self.text))


def as_query(task: str | Query) -> Query:
    """Return ``task`` parsed (a Query is returned as it is)."""
    return task if isinstance(task, Query) else Query.parse(task)
