"""Templates: named, versioned, tagged, task-typed sets of mined examples.

A ``Template`` is what kindling stores and what warm-up reads. Two older formats are read too,
because real installations still hold them:

- ``warm_sessions`` (``warm_sessions/*.json``): ``{name, description, examples: [{tool_name, arguments,
  result_summary, result_success, context_hint}], system_prompt_addendum, tags, source_session_ids,
  created_at, version}``
- ``session-templates`` (``session-templates/*.json``): ``{name, task_type, examples: [{tool_name,
  arguments, result, success}], description, created_at, usage_count, source_session_id}``

Export writes either legacy format with exactly its keys (their loaders reject extra keys), and
``created_at`` as each wrote it: an ISO string in warm_sessions, epoch seconds in session-templates.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from kindling.errors import InvalidNameError, TemplateError
from kindling.mining.model import Example, Lesson, OutcomeStatus

__all__ = [
    "LEGACY_FORMATS",
    "LEGACY_KEYS",
    "SCHEMA_VERSION",
    "TASK_TYPES",
    "Episode",
    "EpisodeStep",
    "Example",
    "LegacyFormat",
    "Lesson",
    "Template",
    "check_task_type",
    "content_key",
    "detect_template_format",
    "export_template",
    "parse_template",
    "utc_now",
    "validate_name",
]

SCHEMA_VERSION = 1
MAX_NAME_LENGTH = 64
# Mirrors kindling.mining.TaskType; kept as plain strings so a stored template never depends on
# an enum's import path.
TASK_TYPES: tuple[str, ...] = ("code", "file", "research", "terminal", "mixed")

LegacyFormat = Literal["warm_sessions", "session-templates"]
LEGACY_FORMATS: tuple[str, ...] = ("warm_sessions", "session-templates")

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")

_WARM_SESSIONS_KEYS = (
    "name",
    "description",
    "examples",
    "system_prompt_addendum",
    "tags",
    "source_session_ids",
    "created_at",
    "version",
)
_WARM_SESSIONS_EXAMPLE_KEYS = ("tool_name", "arguments", "result_summary", "result_success", "context_hint")
_SESSION_TEMPLATES_KEYS = (
    "name",
    "task_type",
    "examples",
    "description",
    "created_at",
    "usage_count",
    "source_session_id",
)
_SESSION_TEMPLATES_EXAMPLE_KEYS = ("tool_name", "arguments", "result", "success")
# Exact keys of each legacy format: (template keys, example keys).
LEGACY_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "warm_sessions": (_WARM_SESSIONS_KEYS, _WARM_SESSIONS_EXAMPLE_KEYS),
    "session-templates": (_SESSION_TEMPLATES_KEYS, _SESSION_TEMPLATES_EXAMPLE_KEYS),
}


def utc_now() -> str:
    """Return the current time as an ISO-8601 UTC string (the timestamp format templates use)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def validate_name(name: str, *, kind: str = "template") -> str:
    """Return ``name`` when it is safe to use as a file name and key.

    Allowed: letters, digits, ``-``, ``_`` and ``.``; no leading dot; at most 64 characters.
    Raises InvalidNameError otherwise (``../x``, ``a/b``, ``.hidden``, empty, too long).
    """
    if not isinstance(name, str) or not name:
        raise InvalidNameError(f"A {kind} name cannot be empty.", name=str(name), kind=kind)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"{kind.capitalize()} name {name[:20]!r}... is {len(name)} characters; "
            f"the limit is {MAX_NAME_LENGTH}.",
            name=name,
            kind=kind,
        )
    if not _NAME_RE.fullmatch(name):
        raise InvalidNameError(
            f"{kind.capitalize()} name {name!r} may only contain letters, digits, '-', '_' and '.' "
            "(no path separators).",
            name=name,
            kind=kind,
        )
    if name.startswith("."):
        raise InvalidNameError(
            f"{kind.capitalize()} name {name!r} cannot start with a dot.", name=name, kind=kind
        )
    return name


def _normalize_timestamp(value: Any) -> str:
    # Legacy files hold either ISO strings or epoch seconds; keep one representation.
    if value is None or value == "":
        return utc_now()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), timezone.utc).isoformat(timespec="seconds")
    if isinstance(value, str):
        return value
    raise ValueError(f"timestamp {value!r} is neither an ISO string nor epoch seconds")


def _task_type_or_none(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = str(getattr(value, "value", value)).lower()
    if text not in TASK_TYPES:
        raise ValueError(f"task_type must be one of {', '.join(TASK_TYPES)}, not {text!r}")
    return text


def check_task_type(value: Any, *, template: str | None = None) -> str | None:
    """Return ``value`` as a stored task type (lower case; None when empty).

    Raises TemplateError when it is not one of code, file, research, terminal or mixed, so callers
    can reject a bad option before doing any work.
    """
    try:
        return _task_type_or_none(value)
    except ValueError as exc:
        raise TemplateError(f"Invalid task type: {exc}.", template=template) from exc


class EpisodeStep(BaseModel):
    """One call that worked in a past task: the tool and where the call sits in its session.

    ``position`` is the call's message index, the same as a mined ``Example.position``, so a step
    finds its example (``session_id`` and ``position``) when that example was kept. A template
    keeps one example per distinct call, shown by one of the sessions that made it; when another
    session's example is this very call (the same tool and arguments), ``example_session`` and
    ``example_position`` name that example, so the past task still offers its call. ``request`` is
    the user message that led to the call when that is a later turn than the task's opening
    (scrubbed like the opening; empty when the opening asked for it).
    """

    model_config = ConfigDict(extra="ignore")

    tool_name: str
    position: int = 0
    example_session: str | None = None
    example_position: int | None = None
    request: str = ""

    @model_serializer(mode="wrap")
    def _without_unset_link(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Most steps are their own example and follow the opening: no null pair and no empty
        # request on each of them in the template file.
        data: dict[str, Any] = handler(self)
        if data.get("example_session") is None:
            data.pop("example_session", None)
            data.pop("example_position", None)
        if not data.get("request"):
            data.pop("request", None)
        return data


class Episode(BaseModel):
    """A successful past task as a unit: its opening request and the calls that worked, in order.

    ``request`` is the benchmark's instruction when the source has one, else the first substantive
    user message; ``opening`` is always that first substantive user message (what an agent sees at
    turn zero, and what a warm-up shows). ``reward`` is the source's reward, where it has one.
    ``tenant`` and ``verified`` are its provenance, as an ``Example``'s.
    """

    model_config = ConfigDict(extra="ignore")

    session_id: str
    request: str = ""
    opening: str = ""
    task_id: str | None = None
    source: str = ""
    reward: float | None = None
    steps: list[EpisodeStep] = Field(default_factory=list)
    tenant: str | None = None
    verified: bool | None = None

    @property
    def tools(self) -> list[str]:
        """The distinct tools of the episode's steps, in order of first use."""
        return list(dict.fromkeys(step.tool_name for step in self.steps))


class Template(BaseModel):
    """A named, versioned set of examples, with what warm-up needs to pick and present them.

    ``version`` starts at 1 and is bumped by the store on every save of an existing name;
    ``usage_count`` counts injections and is maintained by the store, not by callers. ``tenant``
    is whose experience it holds (None: a source without tenants, which the default tenant warms
    from); ``shared`` is set by an admin (``kindling templates share``) to let every tenant warm
    from it. A rebuild that changes what it holds is not shared until an admin shares it again.
    ``lessons`` are the past failures and what worked next (``kindling.mining.lessons``); a
    template saved before they existed loads with none.
    """

    model_config = ConfigDict(extra="ignore", validate_assignment=False)

    schema_version: int = SCHEMA_VERSION
    name: str
    description: str = ""
    task_type: str | None = None
    tags: list[str] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)
    episodes: list[Episode] = Field(default_factory=list)
    lessons: list[Lesson] = Field(default_factory=list)
    system_prompt_addendum: str = ""
    source_session_ids: list[str] = Field(default_factory=list)
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)
    version: int = 1
    usage_count: int = 0
    tenant: str | None = None
    shared: bool = False

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        validate_name(value)
        return value

    @field_validator("task_type")
    @classmethod
    def _check_task_type(cls, value: str | None) -> str | None:
        return _task_type_or_none(value)

    @field_validator("tenant")
    @classmethod
    def _check_tenant(cls, value: str | None) -> str | None:
        return None if value is None else validate_name(value, kind="tenant")

    @field_validator("created_at", "updated_at", mode="before")
    @classmethod
    def _check_timestamp(cls, value: Any) -> str:
        return _normalize_timestamp(value)

    @field_validator("tags")
    @classmethod
    def _check_tags(cls, value: list[str]) -> list[str]:
        # Order kept, duplicates and blanks dropped: tags are a set people read as a list.
        seen: dict[str, None] = {}
        for tag in value:
            tag = str(tag).strip()
            if tag:
                seen.setdefault(tag, None)
        return list(seen)

    def summary(self) -> dict[str, Any]:
        """Return the fields a listing shows (no examples), as JSON-ready data."""
        return {
            "name": self.name,
            "description": self.description,
            "task_type": self.task_type,
            "tags": list(self.tags),
            "examples": len(self.examples),
            "episodes": len(self.episodes),
            "lessons": len(self.lessons),
            "tools": sorted({e.tool_name for e in self.examples}),
            "version": self.version,
            "usage_count": self.usage_count,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "tenant": self.tenant,
            "shared": self.shared,
        }


def content_key(template: Template) -> bytes:
    """Return what a template holds, without its version, timestamps or usage: equal keys, same content."""
    import orjson

    data = template.model_dump(mode="json", exclude={"version", "created_at", "updated_at", "usage_count"})
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def detect_template_format(data: Any) -> str:
    """Return ``"kindling"``, ``"warm_sessions"`` or ``"session-templates"`` for parsed JSON data.

    Raises TemplateError when ``data`` is not a template object in any known format.
    """
    if not isinstance(data, dict):
        raise TemplateError(f"A template must be a JSON object, not {type(data).__name__}.")
    if "schema_version" in data or "updated_at" in data:
        return "kindling"
    examples = data.get("examples")
    first = examples[0] if isinstance(examples, list) and examples else None
    if isinstance(first, dict):
        if "result_summary" in first or "context_hint" in first or "result_success" in first:
            return "warm_sessions"
        if "success" in first or ("result" in first and "outcome" not in first and "context" not in first):
            return "session-templates"
    keys = set(data)
    if "source_session_id" in keys or ("task_type" in keys and keys <= set(_SESSION_TEMPLATES_KEYS)):
        return "session-templates"
    if keys <= set(_WARM_SESSIONS_KEYS) and keys & {"system_prompt_addendum", "source_session_ids"}:
        return "warm_sessions"
    return "kindling"


def _legacy_arguments(value: Any) -> tuple[dict[str, Any], str | None]:
    """Return (arguments, raw text): legacy files hold an object or, as the chat API sends it, a JSON string."""
    if value is None or value == "":
        return {}, None
    if isinstance(value, dict):
        return dict(value), None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}, value
        return (parsed, None) if isinstance(parsed, dict) else ({}, value)
    raise ValueError(f"arguments must be an object or a JSON string, not {type(value).__name__}")


def _example_from_warm_sessions(item: dict[str, Any]) -> Example:
    success = item.get("result_success", True)
    arguments, raw = _legacy_arguments(item.get("arguments"))
    return Example(
        tool_name=str(item["tool_name"]),
        arguments=arguments,
        raw_arguments=raw,
        result=str(item.get("result_summary") or ""),
        outcome=OutcomeStatus.OK if success is not False else OutcomeStatus.FAILED,
        context=str(item.get("context_hint") or ""),
    )


def _example_from_session_templates(item: dict[str, Any], session_id: str) -> Example:
    success = item.get("success", True)
    arguments, raw = _legacy_arguments(item.get("arguments"))
    return Example(
        tool_name=str(item["tool_name"]),
        arguments=arguments,
        raw_arguments=raw,
        result=str(item.get("result") or ""),
        outcome=OutcomeStatus.OK if success is not False else OutcomeStatus.FAILED,
        session_id=session_id,
    )


def parse_template(data: Any, *, name: str | None = None) -> Template:
    """Build a Template from parsed JSON in kindling's format or either legacy format.

    ``name`` is used when the data carries none (a legacy file named after its template).
    Raises TemplateError (naming the template) when the data is not a valid template, and
    InvalidNameError when its name is unsafe.
    """
    fmt = detect_template_format(data)
    label = str(data.get("name") or name or "?")
    try:
        if fmt == "kindling":
            payload = dict(data)
        elif fmt == "warm_sessions":
            payload = {
                "name": data.get("name") or name,
                "description": data.get("description") or "",
                "examples": [_example_from_warm_sessions(e) for e in data.get("examples") or []],
                "system_prompt_addendum": data.get("system_prompt_addendum") or "",
                "tags": data.get("tags") or [],
                "source_session_ids": [str(s) for s in data.get("source_session_ids") or []],
                "created_at": data.get("created_at"),
                "updated_at": data.get("created_at"),
                "version": int(data.get("version") or 1),
            }
        else:
            session_id = str(data.get("source_session_id") or "")
            payload = {
                "name": data.get("name") or name,
                "description": data.get("description") or "",
                "task_type": data.get("task_type") or None,
                "examples": [
                    _example_from_session_templates(e, session_id) for e in data.get("examples") or []
                ],
                "source_session_ids": [session_id] if session_id else [],
                "created_at": data.get("created_at"),
                "updated_at": data.get("created_at"),
                "usage_count": int(data.get("usage_count") or 0),
            }
        if payload.get("name") is None and name is not None:
            payload["name"] = name
        return Template.model_validate(payload)
    except InvalidNameError:
        raise
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "template"
        raise TemplateError(
            f"Template {label!r} ({fmt} format) is invalid at {where}: {first.get('msg')}.", template=label
        ) from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TemplateError(
            f"Template {label!r} ({fmt} format) is invalid: {exc!s} is missing or malformed.", template=label
        ) from exc


def _legacy_arguments_out(example: Example) -> dict[str, Any] | str:
    # Arguments that were text, not an object, go back out as that text.
    if not example.arguments and example.raw_arguments:
        return example.raw_arguments
    return dict(example.arguments)


def _epoch_seconds(timestamp: str) -> float | str:
    # session-templates files hold created_at as epoch seconds (time.time()); a timestamp that
    # does not parse is written back unchanged rather than invented.
    try:
        parsed = datetime.fromisoformat(timestamp)
    except ValueError:
        return timestamp
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def export_template(template: Template, fmt: str = "kindling") -> dict[str, Any]:
    """Return ``template`` as JSON-ready data in ``fmt``: kindling, warm_sessions or session-templates.

    Legacy exports hold exactly the keys their loaders expect, in their order.
    Raises TemplateError for an unknown format.
    """
    if fmt == "kindling":
        return template.model_dump(mode="json")
    if fmt == "warm_sessions":
        return {
            "name": template.name,
            "description": template.description,
            "examples": [
                {
                    "tool_name": e.tool_name,
                    "arguments": _legacy_arguments_out(e),
                    "result_summary": e.result,
                    "result_success": e.outcome is not OutcomeStatus.FAILED,
                    "context_hint": e.context,
                }
                for e in template.examples
            ],
            "system_prompt_addendum": template.system_prompt_addendum,
            "tags": list(template.tags),
            "source_session_ids": list(template.source_session_ids),
            "created_at": template.created_at,
            "version": template.version,
        }
    if fmt == "session-templates":
        return {
            "name": template.name,
            "task_type": template.task_type or "mixed",
            "examples": [
                {
                    "tool_name": e.tool_name,
                    "arguments": _legacy_arguments_out(e),
                    "result": e.result,
                    "success": e.outcome is not OutcomeStatus.FAILED,
                }
                for e in template.examples
            ],
            "description": template.description,
            "created_at": _epoch_seconds(template.created_at),
            "usage_count": template.usage_count,
            "source_session_id": template.source_session_ids[0] if template.source_session_ids else "",
        }
    raise TemplateError(
        f"Unknown template format {fmt!r}; use kindling, warm_sessions or session-templates.",
        template=template.name,
    )
