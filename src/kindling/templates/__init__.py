"""kindling.templates: named, versioned sets of mined examples, stored as JSON files or in SQL.

``build_template`` lives in :mod:`kindling.templates.build` and is imported lazily here, because
it pulls in the session readers and mining.
"""

from __future__ import annotations

from typing import Any

from kindling.templates.model import (
    LEGACY_FORMATS,
    Example,
    Template,
    export_template,
    parse_template,
    validate_name,
)
from kindling.templates.store import JsonDirStore, SqlStore, StoreProblem, TemplateStore, open_store

__all__ = [
    "LEGACY_FORMATS",
    "Example",
    "JsonDirStore",
    "SqlStore",
    "StoreProblem",
    "Template",
    "TemplateStore",
    "build_template",
    "export_template",
    "open_store",
    "parse_template",
    "validate_name",
]


def __getattr__(name: str) -> Any:
    if name == "build_template":
        from kindling.templates.build import build_template

        return build_template
    raise AttributeError(f"module 'kindling.templates' has no attribute {name!r}")
