"""Warm a replayed conversation exactly as kindling's proxy warms a conversation's first request.

One function, so the evaluation follows the proxy wherever the proxy's warm-up goes: the task is
the conversation's first user request (``find_task``), the warm-up comes from the best template
of the store for it, limited to the conversation's tools and not counted as a use, and it is
dropped when it is empty or shows a tool the conversation lacks. The block goes after the leading
system messages (``inject``). The proxy chooses it once per conversation and sends the same block
with every later request; the evaluation does the same (``warm_block`` once per session,
``with_block`` per step).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kindling.errors import NotFoundError, StoreError
from kindling.templates.model import Template
from kindling.templates.store import TemplateStore
from kindling.warmup.inject import inject
from kindling.warmup.tokens import estimate_conversation_tokens
from kindling.warmup.warm import find_task, warm

__all__ = ["LoadedTemplates", "WarmBlock", "warm_block", "with_block"]


class LoadedTemplates(TemplateStore):
    """A store's current templates read once and kept, for the many warm-ups of one evaluation
    (the proxy likewise keeps what it read); read-only."""

    def __init__(self, store: TemplateStore) -> None:
        self.store = store
        self.templates = store.list()
        self.problems = list(store.problems)

    @property
    def location(self) -> str:
        """The wrapped store's location."""
        return self.store.location

    def list(self) -> list[Template]:
        """The templates read when this was made."""
        return self.templates

    def get(self, name: str, version: int | None = None) -> Template:
        """The template ``name`` as read (an earlier ``version`` from the store)."""
        if version is not None:
            return self.store.get(name, version)
        for template in self.templates:
            if template.name == name:
                return template
        raise NotFoundError(f"No template named {name!r} in {self.location}.", kind="template", name=name)

    def versions(self, name: str) -> builtins.list[int]:
        """The wrapped store's versions of ``name``."""
        return self.store.versions(name)

    def save(self, template: Template) -> Template:
        """Refused: the evaluation's templates are fixed once built."""
        raise StoreError(f"{self.location} is read-only here.", path=None)

    def delete(self, name: str) -> None:
        """Refused: the evaluation's templates are fixed once built."""
        raise StoreError(f"{self.location} is read-only here.", path=None)

    def record_use(self, name: str) -> int:
        """Not counted: a replay is not a use (the proxy does not count its warm-ups either)."""
        return self.get(name).usage_count


@dataclass(frozen=True)
class WarmBlock:
    """The warm-up messages chosen for a conversation, their template and estimated tokens."""

    messages: list[dict[str, Any]]
    template: str
    tokens: int


def warm_block(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[str],
    *,
    store: TemplateStore,
    budget: int | None = None,
) -> WarmBlock | None:
    """Return the warm-up the proxy would insert into ``messages`` offered ``tools`` (None: none).

    Raises what ``kindling.warmup.warm`` raises for a store that cannot be read.
    """
    if not tools:
        return None
    task = find_task([m for m in messages if isinstance(m, Mapping)])
    options: dict[str, Any] = {}
    if budget is not None:
        options["budget"] = budget
    try:
        result = warm(None, task, store=store, record_use=False, tools=list(tools), **options)
    except NotFoundError:
        return None
    if not result.messages or not set(result.tools) <= set(tools):
        return None
    return WarmBlock(result.messages, result.template.name, estimate_conversation_tokens(result.messages))


def with_block(messages: Sequence[Mapping[str, Any]], block: WarmBlock | None) -> list[dict[str, Any]]:
    """Return ``messages`` with ``block`` after their leading system messages (a copy either way)."""
    if block is None:
        return [dict(m) for m in messages]
    return inject(messages, block.messages)
