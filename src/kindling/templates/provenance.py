"""Where a template's experience came from, and sharing it with every tenant.

Every example and past task (episode) keeps its provenance: the ``source`` and ``session_id`` it
was mined from, the ``tenant`` whose experience it is (None: a source without tenants), and whether
its calls are ones kindling's proxy relayed from the model itself (``verified``; None: the source
cannot say). This module lays that out for people (``kindling templates show --provenance``), for
the warm-ups that use it (``provenance_of_calls``), and for an admin about to share a template with
every tenant (``share_preview``, ``share_template``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from kindling.mining.model import Example
from kindling.sessions.convert import arguments_value
from kindling.templates.model import Episode, Template
from kindling.templates.store import TemplateStore, owner_of

__all__ = ["provenance_of_calls", "provenance_rows", "provenance_summary", "share_preview", "share_template"]

_REQUEST_CHARS = 120


def _verified(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "no")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REQUEST_CHARS else text[: _REQUEST_CHARS - 1] + "…"


def _example_row(example: Example) -> dict[str, Any]:
    return {
        "kind": "example",
        "tool": example.tool_name,
        "request": _short(example.context),
        "source": example.source or None,
        "session": example.session_id or None,
        "tenant": example.tenant,
        "verified": example.verified,
    }


def _episode_row(episode: Episode) -> dict[str, Any]:
    return {
        "kind": "past_task",
        "tool": ", ".join(episode.tools),
        "request": _short(episode.opening or episode.request),
        "source": episode.source or None,
        "session": episode.session_id or None,
        "tenant": episode.tenant,
        "verified": episode.verified,
    }


def provenance_rows(template: Template) -> list[dict[str, Any]]:
    """One row per example, then per past task: what it is and where it came from (JSON-ready)."""
    return [*(_example_row(e) for e in template.examples), *(_episode_row(e) for e in template.episodes)]


def provenance_summary(template: Template) -> dict[str, Any]:
    """Counts of the template's examples and past tasks by tenant, by source and by verification,
    and how many sessions they came from."""
    items: list[Example | Episode] = [*template.examples, *template.episodes]
    return {
        "examples": len(template.examples),
        "past_tasks": len(template.episodes),
        "sessions": len({item.session_id for item in items if item.session_id}),
        "by_tenant": dict(sorted(Counter(item.tenant or "(none)" for item in items).items())),
        "by_source": dict(sorted(Counter(item.source or "(unknown)" for item in items).items())),
        "verified": dict(sorted(Counter(_verified(item.verified) for item in items).items())),
    }


def share_preview(template: Template) -> dict[str, Any]:
    """What sharing ``template`` would give every tenant: its owner, what it holds, where from,
    and the first requests its past tasks answer."""
    requests = [_short(e.opening or e.request) for e in template.episodes if e.opening or e.request]
    if not requests:
        requests = list(dict.fromkeys(_short(e.context) for e in template.examples if e.context))
    return {
        "name": template.name,
        "version": template.version,
        "owner": owner_of(template),
        "shared": template.shared,
        **provenance_summary(template),
        "tools": sorted({e.tool_name for e in template.examples}),
        "sample_requests": requests[:5],
    }


def share_template(store: TemplateStore, name: str, *, shared: bool = True) -> Template:
    """Mark template ``name`` shared with every tenant (or not); return it as stored.

    Sharing saves a new version (what was shared stays on record); a template already in that state
    is returned as it is. Raises NotFoundError when it is missing, StoreError when the store fails.
    """
    template = store.get(name)
    if template.shared == shared:
        return template
    return store.save(template.model_copy(update={"shared": shared}))


def provenance_of_calls(template: Template, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The provenance of each past call a warm-up's ``messages`` show, in order, found among
    ``template``'s examples by tool and arguments (``found: false`` for a call none matches)."""
    index: dict[tuple[str, bytes], Example] = {}
    for example in template.examples:
        arguments: Any = dict(example.arguments)
        if not arguments and example.raw_arguments:
            arguments = {"input": example.raw_arguments}
        index.setdefault((example.tool_name, orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)), example)
    rows: list[dict[str, Any]] = []
    for call in _calls(messages):
        found_function = call.get("function")
        function: Mapping[str, Any] = found_function if isinstance(found_function, Mapping) else {}
        name = str(function.get("name") or "")
        key = (name, orjson.dumps(arguments_value(function.get("arguments")), option=orjson.OPT_SORT_KEYS))
        found = index.get(key)
        if found is None:
            rows.append({"tool": name, "found": False})
            continue
        row = _example_row(found)
        row.pop("kind")
        rows.append({**row, "found": True})
    return rows


def _calls(messages: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, Mapping):
                yield call
