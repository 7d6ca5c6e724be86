"""A template store that keeps what it read for a few seconds, for warm-ups on the request path.

A conversation's first request waits for its warm-up, so reading and validating every template file
for each one would cost every new conversation that much. ``CachedTemplates`` wraps any store:
``list`` and ``get`` of current versions answer from a copy at most ``ttl`` seconds old (a new or
rebuilt template is used within that time); everything else goes to the store itself.
"""

from __future__ import annotations

import builtins
import threading
import time

from kindling.errors import NotFoundError
from kindling.templates.model import Template
from kindling.templates.store import TemplateStore

__all__ = ["CachedTemplates"]


class CachedTemplates(TemplateStore):
    """``store`` with ``list`` and current-version ``get`` cached for ``ttl`` seconds."""

    def __init__(self, store: TemplateStore, ttl: float = 5.0) -> None:
        self.store = store
        self.ttl = ttl
        self.problems = []
        self._loaded_at = float("-inf")
        self._templates: list[Template] = []
        self._lock = threading.Lock()

    @property
    def location(self) -> str:
        """The wrapped store's location."""
        return self.store.location

    def list(self) -> list[Template]:
        """Every loadable template, as read at most ``ttl`` seconds ago (the same list object until then)."""
        with self._lock:
            if time.monotonic() - self._loaded_at >= self.ttl:
                self._templates = self.store.list()
                self.problems = list(self.store.problems)
                self._loaded_at = time.monotonic()
            return self._templates

    def get(self, name: str, version: int | None = None) -> Template:
        """The template ``name`` from the cached list (an earlier ``version`` from the store)."""
        if version is None:
            for template in self.list():
                if template.name == name:
                    return template
            raise NotFoundError(f"No template named {name!r} in {self.location}.", kind="template", name=name)
        return self.store.get(name, version)

    def forget(self) -> None:
        """Read the store again on the next ``list`` or ``get``."""
        self._loaded_at = float("-inf")

    def save(self, template: Template) -> Template:
        """Save through the wrapped store and forget the cached copy."""
        saved = self.store.save(template)
        self._loaded_at = float("-inf")
        return saved

    def versions(self, name: str) -> builtins.list[int]:
        """The wrapped store's versions of ``name``."""
        return self.store.versions(name)

    def delete(self, name: str) -> None:
        """Delete through the wrapped store and forget the cached copy."""
        self.store.delete(name)
        self._loaded_at = float("-inf")

    def record_use(self, name: str) -> int:
        """Count a use in the wrapped store."""
        return self.store.record_use(name)
