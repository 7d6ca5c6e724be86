"""kindling's tools and resources as an MCP server (the official ``mcp`` SDK's low-level ``Server``).

Tools: ``warm_session`` (the agent tool of ``kindling.integrations.warm_tool``: warm-up messages
as structured content plus a short readable text), ``request_confirmation`` (asks the confirmation
daemon and waits for a human, sending progress notifications while it waits),
``tool_failure_rates`` (which tools fail in the configured session sources, and how often, per
session length), ``memory`` (read, add, replace, remove in Hermes's MEMORY.md / USER.md through
``kindling.review.memory.MemoryStore``, with its limits and checks) and ``skills`` (list, view,
create through ``kindling.review.skills.SkillStore``). Resources: every template as
``kindling://templates/{name}`` and the two memory files as ``kindling://memory/memory`` and
``kindling://memory/user``.

Watched over HTTP (``McpEdge``, with ``kindling.observe``): ``/health``, ``/ready`` (the template
store opens, the session sources exist; cached briefly) and ``/metrics`` (requests by route and
status, tool calls by tool and outcome; the metrics token or the server's own), and with tracing on
a span per request and per tool call (the tool's name, the MCP session id, the outcome: never
its arguments or result).

Each tool's arguments are one pydantic model: it yields the JSON schema the client sees and
validates the call, so the two never drift (``warm_session`` reuses its own published schema and
checks). A bad argument, a refused write or an unreachable daemon comes back as an MCP tool error
with one clear sentence; nothing a client sends crashes the server. ``create_server`` builds the
server; ``run_stdio`` and ``run_http`` serve it (HTTP: streamable HTTP, loopback by default, a
bearer token required on any other address).
"""

from __future__ import annotations

import fnmatch
import hmac
import ipaddress
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kindling.config import MCP_DEFAULT_PORT, MCP_TOKEN_ENV
from kindling.errors import ConfigError, KindlingError, ToolCallError
from kindling.version import kindling_version

__all__ = [
    "ConfirmationArgs",
    "FailureRatesArgs",
    "McpSettings",
    "MemoryArgs",
    "SkillsArgs",
    "create_server",
    "is_loopback",
    "run_http",
    "run_stdio",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "kindling"
TEMPLATE_URI = "kindling://templates/{name}"
MEMORY_URI = "kindling://memory/{target}"
MEMORY_TARGETS = ("memory", "user")
TOKEN_ENV = MCP_TOKEN_ENV
DEFAULT_PORT = MCP_DEFAULT_PORT
PROGRESS_INTERVAL = 5.0
PREVIEW_LINES = 12


@dataclass(frozen=True)
class McpSettings:
    """What the server reaches: session sources, the confirmation daemon, and how it waits.

    ``sources`` are what ``tool_failure_rates`` reads (default: ``$HERMES_HOME/state.db``); the
    client cannot choose them. ``confirm_url``/``confirm_token`` are the daemon's address and the
    agent's token (``KINDLING_CONFIRM_URL``, ``KINDLING_CONFIRM_TOKEN``). ``progress_interval`` is
    how often, in seconds, ``request_confirmation`` reports that it is still waiting.
    """

    sources: tuple[str, ...] = ()
    confirm_url: str = ""
    confirm_token: str = ""
    progress_interval: float = PROGRESS_INTERVAL

    @classmethod
    def from_env(cls, *, sources: Sequence[str] = (), progress_interval: float | None = None) -> McpSettings:
        """Return settings from ``KINDLING_CONFIRM_URL`` / ``KINDLING_CONFIRM_TOKEN`` and ``sources``."""
        from kindling.confirm.client import DEFAULT_URL

        return cls(
            sources=tuple(sources),
            confirm_url=os.environ.get("KINDLING_CONFIRM_URL") or DEFAULT_URL,
            confirm_token=os.environ.get("KINDLING_CONFIRM_TOKEN", ""),
            progress_interval=progress_interval if progress_interval is not None else PROGRESS_INTERVAL,
        )


# -- argument models: one declaration per tool gives the schema and the validation ----------------


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class ConfirmationArgs(_Arguments):
    """Arguments of ``request_confirmation``."""

    action: str = Field(
        min_length=1, max_length=200, description="Short machine name, e.g. deploy_production."
    )
    description: str = Field(min_length=1, description="What exactly will happen, for the human.")
    details: dict[str, Any] | None = Field(
        None, description="Everything the human needs to judge: targets, diffs."
    )
    timeout_seconds: int | None = Field(
        None,
        ge=1,
        le=86_400,
        description="How long to wait for the human (the daemon's default when omitted).",
    )
    session_key: str | None = Field(None, description="Groups requests of one agent session, for the human.")


class FailureRatesArgs(_Arguments):
    """Arguments of ``tool_failure_rates``."""

    tool: str | None = Field(
        None, description="Only tools whose name matches this shell-style glob, e.g. 'web_*'."
    )
    top: int = Field(20, ge=1, le=500, description="At most this many tools, highest failure rate first.")
    min_results: int = Field(1, ge=0, description="Leave out tools with fewer results than this.")


class MemoryArgs(_Arguments):
    """Arguments of ``memory``."""

    action: Literal["read", "add", "replace", "remove"] = Field(description="What to do.")
    target: Literal["memory", "user"] = Field(
        "memory",
        description="'memory' for the agent's notes (MEMORY.md), 'user' for the user profile (USER.md).",
    )
    content: str | None = Field(None, description="The entry text, for add and replace.")
    old_text: str | None = Field(None, description="A short unique part of the entry to replace or remove.")

    @model_validator(mode="after")
    def _needs(self) -> MemoryArgs:
        if self.action in ("add", "replace") and not self.content:
            raise ValueError(f"content is required for {self.action}")
        if self.action in ("replace", "remove") and not self.old_text:
            raise ValueError(f"old_text is required for {self.action}")
        return self


class SkillsArgs(_Arguments):
    """Arguments of ``skills``."""

    action: Literal["list", "view", "create"] = Field(description="What to do.")
    name: str | None = Field(
        None, description="The skill name, for view and create (e.g. 'deploy-static-site')."
    )
    content: str | None = Field(
        None,
        description="create: the full SKILL.md, YAML front matter (name, description) then the instructions.",
    )
    category: str | None = Field(None, description="create: an optional category directory.")

    @model_validator(mode="after")
    def _needs(self) -> SkillsArgs:
        if self.action in ("view", "create") and not self.name:
            raise ValueError(f"name is required for {self.action}")
        if self.action == "create" and not self.content:
            raise ValueError("content is required for create")
        return self


# -- tools -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Output:
    text: str
    data: dict[str, Any] = field(default_factory=dict)


_Handler = Callable[[Any, Any, McpSettings], Awaitable[_Output]]


@dataclass(frozen=True)
class _ToolSpec:
    name: str
    description: str
    schema: dict[str, Any]
    arguments: type[_Arguments] | None
    handler: _Handler


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


async def _warm_session(_ctx: Any, args: dict[str, Any], settings: McpSettings) -> _Output:
    from kindling.config import hermes_state_db
    from kindling.integrations.warm_tool import warm_session

    # A client builds only from the sources the server was started with, never from files it names.
    sources = list(settings.sources) or [str(hermes_state_db())]
    data = json.loads(await anyio.to_thread.run_sync(partial(warm_session, args, sources=sources)))
    if not data.get("success"):
        raise ToolCallError(str(data.get("error") or "warm_session failed."))
    action = data.get("action")
    if action in ("load", "inject"):
        shown = data.get("messages") or []
        count = data.get("injected", len(shown))
        lines = [
            f"Template {data.get('template')!r}: {count} warm-up messages, "
            f"about {data.get('estimated_tokens', '?')} tokens."
        ]
        preview = str(data.get("preview") or "").splitlines()
        lines += preview[:PREVIEW_LINES] + (["…"] if len(preview) > PREVIEW_LINES else [])
        text = "\n".join(lines)
    elif action == "list":
        names = [t.get("name") for t in data.get("templates", [])]
        text = f"{len(names)} templates: {', '.join(map(str, names))}." if names else "No templates yet."
    else:
        text = str(data.get("message") or f"{action} done.")
    return _Output(text, data)


def _confirm_client(settings: McpSettings) -> Any:
    from kindling.confirm.client import DEFAULT_URL, ConfirmClient

    if not settings.confirm_token:
        raise ToolCallError("KINDLING_CONFIRM_TOKEN is not set for the MCP server; it cannot ask a human.")
    return ConfirmClient(settings.confirm_url or DEFAULT_URL, settings.confirm_token)


async def _request_confirmation(ctx: Any, args: ConfirmationArgs, settings: McpSettings) -> _Output:
    """Ask the daemon and wait for the human; return the decision.

    Raises ToolCallError, which tells the model not to go ahead, for anything but a well-formed
    answer about the request submitted here (the daemon unreachable or refusing, a redirect, a body
    that is not this request's record) and when the deadline (the request's timeout plus
    ``DEADLINE_MARGIN`` seconds) passes without one.
    """
    from kindling.confirm.client import DEADLINE_MARGIN

    client = _confirm_client(settings)
    started = time.monotonic()
    timeout = args.timeout_seconds
    try:
        submitted = await anyio.to_thread.run_sync(
            partial(
                client.submit,
                args.action,
                args.description,
                args.details,
                session_key=args.session_key,
                timeout_seconds=timeout,
                deadline=started + timeout + DEADLINE_MARGIN if timeout is not None else None,
            )
        )
        record = submitted
        if submitted["status"] == "pending":
            record = await _wait_for_human(
                ctx, client, submitted, settings.progress_interval, started, timeout
            )
    except Exception as exc:
        why = str(exc) if isinstance(exc, KindlingError) else f"{type(exc).__name__}: {str(exc)[:200]}"
        if not isinstance(exc, KindlingError):
            logger.exception("kindling MCP request_confirmation failed")
        raise ToolCallError(f"Not approved: do not perform {args.action!r}. {why}") from None
    finally:
        client.close()
    status = str(record["status"])
    approved = status in ("approved", "auto_approved")
    data = {
        "approved": approved,
        "status": status,
        "request_id": record.get("id"),
        "decided_by": record.get("decided_by"),
        "reason": record.get("reason"),
    }
    if approved:
        text = f"Approved ({status}) by {record.get('decided_by') or 'the whitelist'}: you may {args.action}."
    else:
        text = f"Do not perform {args.action!r}: the request was {status}."
    if record.get("reason"):
        text += f" Reason: {record['reason']}"
    return _Output(text, data)


async def _wait_for_human(
    ctx: Any,
    client: Any,
    submitted: dict[str, Any],
    interval: float,
    started: float,
    timeout: int | None,
) -> dict[str, Any]:
    from kindling.confirm.client import DEADLINE_MARGIN, LAST_ANSWER, request_timeout

    request_id = str(submitted["id"])
    total = float(timeout) if timeout is not None else request_timeout(submitted)
    # Past the request's own timeout, so the daemon's expiry (a denial) is what we report; at the
    # deadline nothing is waited for any more.
    deadline = started + total + DEADLINE_MARGIN
    until = deadline - LAST_ANSWER
    record = submitted
    await ctx.session.report_progress(
        0.0, total, f"Waiting for a human to approve {submitted.get('action')!r}."
    )
    while record["status"] == "pending":
        remaining = until - time.monotonic()
        if remaining <= 0:
            break
        record = await anyio.to_thread.run_sync(
            partial(client.wait, request_id, max(0.1, min(interval, remaining)), deadline=deadline),
            abandon_on_cancel=True,
        )
        if record["status"] == "pending":
            waited = time.monotonic() - started
            await ctx.session.report_progress(
                min(waited, total), total, f"Still waiting for a human ({int(waited)} s of {int(total)} s)."
            )
    return record


async def _tool_failure_rates(_ctx: Any, args: FailureRatesArgs, settings: McpSettings) -> _Output:
    stats, reasons, shown = await anyio.to_thread.run_sync(partial(_read_stats, settings.sources))
    data = stats.as_dict()
    by_cohort = data["cohorts"]
    rows = []
    for tool, row in data["tools"].items():
        if args.tool and not fnmatch.fnmatchcase(tool, args.tool):
            continue
        if row["results"] < args.min_results:
            continue
        cohorts = {
            name: {
                k: cohort["tools"][tool][k]
                for k in ("results", "failures", "failure_rate", "ci_low", "ci_high")
            }
            for name, cohort in by_cohort.items()
            if tool in cohort["tools"] and cohort["tools"][tool]["results"]
        }
        failed_by = dict(reasons.get(tool, Counter()).most_common())
        rows.append({"tool": tool, **row, "failed_by": failed_by, "by_session_length": cohorts})
    rows.sort(key=lambda r: (-(r["failure_rate"] or 0.0), -r["results"], r["tool"]))
    rows = rows[: args.top]
    result = {
        "sources": shown,
        "sessions": data["sessions"],
        "tool_calls": data["tool_calls"],
        "results_failed": data["results_failed"],
        "tools": rows,
    }
    lines = [f"{data['sessions']} sessions, {data['tool_calls']} tool calls read from {', '.join(shown)}."]
    for row in rows:
        rate = row["failure_rate"]
        worst = max(
            row["by_session_length"].items(), key=lambda kv: kv[1]["failure_rate"] or 0.0, default=None
        )
        where = f"; worst in {worst[0]} sessions ({worst[1]['failure_rate']:.0%})" if worst and rate else ""
        unknown = f", {row['unknown']} unknown" if row["unknown"] else ""
        how = ", ".join(f"{rule} {count}" for rule, count in list(row["failed_by"].items())[:3])
        lines.append(
            f"- {row['tool']}: {row['failures']} of {row['results']} results failed"
            f" ({(rate or 0.0):.1%}){unknown}{': ' + how if how else ''}{where}"
        )
    if not rows:
        lines.append("No tool matches.")
    return _Output("\n".join(lines), result)


def _read_stats(sources: tuple[str, ...]) -> tuple[Any, dict[str, Counter[str]], list[str]]:
    """Return mining's stats over ``sources``, the rules that judged each tool's results failed, and the sources shown."""
    from kindling.config import hermes_state_db
    from kindling.db import redact_url
    from kindling.mining import mine
    from kindling.mining.config import load_mining_config
    from kindling.mining.outcome import OutcomeClassifier
    from kindling.sessions import iter_sessions
    from kindling.sessions.model import ReadReport, Session

    paths: list[str | Path] = list(sources) or [hermes_state_db()]
    config = load_mining_config()
    classifier = OutcomeClassifier(config.rules())
    reasons: dict[str, Counter[str]] = {}

    def judged(stream: Iterable[Session]) -> Iterator[Session]:
        # One pass: each session is looked at here (how its failed results failed) on its way to mining.
        for session in stream:
            open_calls: dict[str, str] = {}
            for message in session.messages:
                for call in message.tool_calls:
                    open_calls[call.id] = call.name
                tool = open_calls.pop(message.tool_call_id, None) if message.tool_call_id else None
                if tool is not None:
                    outcome = classifier.classify(tool, message.content, message.error)
                    if outcome.failed:
                        reasons.setdefault(tool, Counter())[outcome.rule or "unnamed"] += 1
            yield session

    report = ReadReport()
    streams = [iter_sessions(path, report=report) for path in paths]  # every source opens before any is read
    stats = mine(judged(chain.from_iterable(streams)), max_examples=0, report=report, config=config).stats
    return stats, reasons, [redact_url(p) for p in paths]


def _store_result(result: dict[str, Any]) -> dict[str, Any]:
    if not result.get("success"):
        raise ToolCallError(str(result.get("error") or "The store refused the change."))
    return result


async def _memory(_ctx: Any, args: MemoryArgs, _settings: McpSettings) -> _Output:
    from kindling.review.memory import MemoryStore, Provenance

    def run() -> dict[str, Any]:
        store = MemoryStore()
        if args.action == "read":
            entries = store.entries(args.target)
            return {
                "success": True,
                "target": args.target,
                "entries": entries,
                "usage": store.usage(args.target),
            }
        provenance = Provenance(write_origin="mcp", tool_name="memory")
        return _store_result(
            store.apply(
                args.action, args.target, content=args.content, old_text=args.old_text, provenance=provenance
            )
        )

    data = await anyio.to_thread.run_sync(run)
    if args.action == "read":
        entries = data["entries"]
        text = f"{len(entries)} entries in {args.target} ({data['usage']})" + "".join(
            f"\n- {e}" for e in entries
        )
    else:
        text = str(data.get("message") or f"{args.action} done.")
        if data.get("usage"):
            text += f" {args.target}: {data['usage']}."
    return _Output(text, data)


async def _skills(_ctx: Any, args: SkillsArgs, _settings: McpSettings) -> _Output:
    from kindling.review.skills import SkillStore

    def run() -> dict[str, Any]:
        store = SkillStore(review_created=False)
        if args.action == "list":
            return store.list_result()
        if args.action == "view":
            return _store_result(store.view(str(args.name)))
        return _store_result(store.create(str(args.name), str(args.content), args.category or None))

    data = await anyio.to_thread.run_sync(run)
    if args.action == "list":
        skills = data.get("skills", [])
        text = f"{len(skills)} skills" + "".join(
            f"\n- {s['name']}: {s.get('description') or ''}" for s in skills
        )
    elif args.action == "view":
        text = str(data.get("content") or "")
    else:
        text = str(data.get("message") or "Skill created.")
    return _Output(text, data)


def _tool_specs() -> tuple[_ToolSpec, ...]:
    from kindling.integrations.warm_tool import WARM_SESSION_SCHEMA

    return (
        _ToolSpec(
            "warm_session",
            str(WARM_SESSION_SCHEMA["description"]),
            dict(WARM_SESSION_SCHEMA["parameters"]),
            None,
            _warm_session,
        ),
        _ToolSpec(
            "request_confirmation",
            "Ask a human to approve a risky action (deploying, deleting data, moving money, rotating keys) "
            "BEFORE doing it. Waits until the human approves or denies, reporting progress; a timeout counts "
            "as denied. Only proceed when the result says approved is true.",
            _schema(ConfirmationArgs),
            ConfirmationArgs,
            _request_confirmation,
        ),
        _ToolSpec(
            "tool_failure_rates",
            "Which tools fail in this environment and how: per tool, calls, failed results, the failure rate "
            "with a 95% interval, the rules that judged the failures (json_error, error_prefix, "
            "python_traceback, ...) and the rate by session length, read from the past sessions the server "
            "is configured with. Use it to pick reliable tools or to double-check a flaky one's result.",
            _schema(FailureRatesArgs),
            FailureRatesArgs,
            _tool_failure_rates,
        ),
        _ToolSpec(
            "memory",
            "Read and keep durable facts across sessions in MEMORY.md (target 'memory': your notes on the "
            "environment, conventions, lessons) and USER.md (target 'user': who the user is and how they like "
            "to work). Actions: read, add (content), replace (old_text = a short unique part of the entry, "
            "content = the new entry), remove (old_text). Writes past the size limit, duplicates of the entry "
            "delimiter and instructions aimed at future sessions are refused.",
            _schema(MemoryArgs),
            MemoryArgs,
            _memory,
        ),
        _ToolSpec(
            "skills",
            "Reusable procedures stored as SKILL.md (YAML front matter with name and description, then the "
            "instructions). Actions: list, view (name), create (name, content, optional category). Names use "
            "lowercase letters, digits, '.', '_' and '-'.",
            _schema(SkillsArgs),
            SkillsArgs,
            _skills,
        ),
    )


def _invalid(tool: str, exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return f"Invalid arguments for {tool}: {'; '.join(parts)}."


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


# -- resources -------------------------------------------------------------------------------------


def _templates() -> Any:
    # What an MCP client here may read: the default tenant's templates, those without a tenant and
    # the shared ones; never another tenant's (the proxy builds proxy-TENANT into the same store).
    from kindling.templates.store import DEFAULT_TENANT, TenantTemplates, open_store

    return TenantTemplates(open_store(), DEFAULT_TENANT)


def _list_resources() -> list[types.Resource]:
    resources = [
        types.Resource(
            name=f"memory/{target}",
            uri=MEMORY_URI.format(target=target),
            description=f"Hermes's {'MEMORY.md (agent notes)' if target == 'memory' else 'USER.md (user profile)'}.",
            mime_type="text/markdown",
        )
        for target in MEMORY_TARGETS
    ]
    for template in _templates().list():
        summary = template.summary()
        resources.append(
            types.Resource(
                name=f"templates/{template.name}",
                uri=TEMPLATE_URI.format(name=template.name),
                description=str(summary.get("description") or ""),
                mime_type="application/json",
            )
        )
    return resources


def _read_resource(uri: str) -> tuple[str, str]:
    """Return (mime type, text) of a kindling resource. Raises ToolCallError for an unknown one."""
    from kindling.review.memory import TARGET_FILES, memories_dir
    from kindling.templates.model import validate_name

    prefix_templates = TEMPLATE_URI.split("{", 1)[0]
    prefix_memory = MEMORY_URI.split("{", 1)[0]
    if uri.startswith(prefix_templates):
        name = validate_name(uri[len(prefix_templates) :])
        template = _templates().get(name)
        return "application/json", template.model_dump_json(indent=2)
    if uri.startswith(prefix_memory):
        target = uri[len(prefix_memory) :]
        if target not in MEMORY_TARGETS:
            raise ToolCallError(
                f"Unknown memory resource {uri!r}; use kindling://memory/memory or kindling://memory/user."
            )
        path = memories_dir() / TARGET_FILES[target]
        try:
            return "text/markdown", path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return "text/markdown", ""
        except OSError as exc:
            raise ToolCallError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    raise ToolCallError(f"Unknown resource {uri!r}; kindling serves {TEMPLATE_URI} and {MEMORY_URI}.")


# -- the server ------------------------------------------------------------------------------------


# -- watching the tools -----------------------------------------------------------------------------

#: How a tool call ended: answered, answered with a tool error (a refused write, an unreachable
#: daemon), refused for its arguments, failed unexpectedly, or named no tool kindling serves.
OUTCOMES = ("ok", "error", "invalid", "failed", "unknown_tool")


class ToolMetrics:
    """``kindling_mcp_tool_calls_total{tool,outcome}`` and ``kindling_mcp_tool_call_duration_seconds{tool}``
    as plain counts (``observe.metrics.Counts``), collected when Prometheus scrapes. A name no tool
    has is counted under ``tool="unknown"``, so a client cannot grow the series without bound."""

    def __init__(self, registry: Any) -> None:
        from kindling.observe.metrics import LATENCY_BUCKETS, Counts

        self.durations = Counts(LATENCY_BUCKETS)
        self.calls: dict[tuple[str, str], int] = {}
        registry.register(self)

    def called(self, tool: str, outcome: str, seconds: float) -> None:
        """Count one tool call."""
        key = (tool, outcome)
        self.calls[key] = self.calls.get(key, 0) + 1
        self.durations.observe((tool,), seconds)

    def collect(self) -> Iterator[Any]:
        """Yield the calls counter and the duration histogram."""
        from prometheus_client.core import CounterMetricFamily

        calls = CounterMetricFamily(
            "kindling_mcp_tool_calls",
            f"Tool calls answered, by tool and outcome ({', '.join(OUTCOMES)}).",
            labels=["tool", "outcome"],
        )
        for (tool, outcome), count in list(self.calls.items()):
            calls.add_metric([tool, outcome], count)
        yield calls
        yield self.durations.family(
            "kindling_mcp_tool_call_duration_seconds", "Time to answer a tool call, by tool.", ["tool"]
        )


def _request_header(ctx: Any, name: str) -> str | None:
    """A header of the HTTP request that carried a tool call (None over stdio)."""
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    value = headers.get(name) if headers is not None else None
    return value if isinstance(value, str) else None


def create_server(
    settings: McpSettings | None = None, *, metrics: ToolMetrics | None = None, spans: Any = None
) -> Any:
    """Return the MCP server (an ``mcp.server.Server``) with kindling's tools and resources; each
    tool call is counted in ``metrics`` and spanned by ``spans`` (an ``observe.tracing.Spans``)
    when given."""
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    settings = settings or McpSettings.from_env()
    specs = {spec.name: spec for spec in _tool_specs()}

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=spec.name, description=spec.description, input_schema=spec.schema)
                for spec in specs.values()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if metrics is None and spans is None:
            return (await answer_tool(ctx, params))[0]
        tool = params.name if params.name in specs else "unknown"
        span = None
        if spans is not None:
            attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool}
            request_id = getattr(ctx, "request_id", None)
            if request_id is not None:
                attributes["jsonrpc.request.id"] = str(request_id)
            # A session id where the protocol has sessions (before 2026-07-28 streamable HTTP).
            session = _request_header(ctx, "mcp-session-id")
            if session:
                attributes["mcp.session.id"] = attributes["kindling.session_id"] = session
            span = spans.start(
                f"tools/call {tool}",
                attributes,
                traceparent=_request_header(ctx, "traceparent"),
                internal=True,
            )
        started = time.perf_counter()
        outcome = "failed"
        try:
            result, outcome = await answer_tool(ctx, params)
            return result
        finally:
            if metrics is not None:
                metrics.called(tool, outcome, time.perf_counter() - started)
            if span is not None:
                span.set_attribute("kindling.mcp.outcome", outcome)
                span.end()

    async def answer_tool(ctx: Any, params: types.CallToolRequestParams) -> tuple[types.CallToolResult, str]:
        spec = specs.get(params.name)
        if spec is None:
            return _error(
                f"Unknown tool {params.name!r}; kindling serves {', '.join(specs)}."
            ), "unknown_tool"
        raw = dict(params.arguments or {})
        try:
            args: Any = spec.arguments.model_validate(raw) if spec.arguments is not None else raw
            output = await spec.handler(ctx, args, settings)
        except ValidationError as exc:
            return _error(_invalid(spec.name, exc)), "invalid"
        except KindlingError as exc:
            return _error(str(exc)), "error"
        except Exception as exc:  # a bug must not take the server down with it
            logger.exception("kindling MCP tool %s failed", spec.name)
            return _error(f"{spec.name} failed unexpectedly: {type(exc).__name__}: {exc}"), "failed"
        result = types.CallToolResult(
            content=[types.TextContent(type="text", text=output.text)], structured_content=output.data
        )
        return result, "ok"

    async def list_resources(_ctx: Any, _params: Any) -> types.ListResourcesResult:
        try:
            resources = await anyio.to_thread.run_sync(_list_resources)
        except KindlingError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None
        return types.ListResourcesResult(resources=resources)

    async def list_templates(_ctx: Any, _params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name="template",
                    uri_template=TEMPLATE_URI,
                    description="A warm-up template: its examples, type, tags and versions (JSON).",
                    mime_type="application/json",
                ),
                types.ResourceTemplate(
                    name="memory",
                    uri_template=MEMORY_URI,
                    description="Hermes's memory files: target 'memory' (MEMORY.md) or 'user' (USER.md).",
                    mime_type="text/markdown",
                ),
            ]
        )

    async def read_resource(_ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            mime, text = await anyio.to_thread.run_sync(_read_resource, uri)
        except KindlingError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    return Server(
        SERVER_NAME,
        version=kindling_version(),
        instructions="kindling: warm-up examples from past sessions, human confirmation, tool failure rates, "
        "memory and skills.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def run_stdio(settings: McpSettings | None = None) -> None:
    """Serve over stdin/stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = create_server(settings)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def is_loopback(host: str) -> bool:
    """Return True when ``host`` is a loopback address or ``localhost``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def http_app(
    settings: McpSettings | None = None,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    allow_hosts: Sequence[str] = (),
    metrics: bool = True,
    metrics_token: str | None = None,
    spans: Any = None,
) -> McpEdge:
    """Return the streamable-HTTP ASGI app at ``/mcp``; with ``token`` every request needs that bearer token.

    Whatever ``host`` it listens on, requests must name it (or localhost, a loopback address, or one
    of ``allow_hosts``) in their Host header, come from no other web page (Origin) and send JSON
    bodies: a browser cannot forge them, whatever name it is tricked into resolving to this machine.
    It also answers ``/health``, ``/ready`` and (unless ``metrics`` is off) ``/metrics``, which takes
    ``metrics_token`` or ``token`` (see ``McpEdge``). ``spans`` traces requests and tool calls
    (default: as the ``OTEL_*`` variables say). Raises ConfigError when ``host`` is not loopback
    and there is no token, or for a metrics token under 16 characters.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    from kindling.httpguard import ForgeryGuard, allowed_hosts

    if not token and not is_loopback(host):
        raise ConfigError(
            f"kindling mcp will not listen on {host} without a bearer token: pass --token or set {TOKEN_ENV} "
            "(or listen on 127.0.0.1)."
        )
    names = sorted(allowed_hosts(host, allow_hosts) | {host.strip("[]")})
    shown = [f"[{name}]" if ":" in name else name for name in names]
    # The SDK's own check, given the same names (it would guard only 127.0.0.1, localhost and ::1).
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}{port}" for name in shown for port in ("", ":*")],
        allowed_origins=[
            f"{scheme}://{name}{port}"
            for name in shown
            for scheme in ("http", "https")
            for port in ("", ":*")
        ],
    )
    if metrics_token is not None and len(metrics_token) < MIN_METRICS_TOKEN:
        raise ConfigError(
            f"{METRICS_TOKEN_ENV} must be at least {MIN_METRICS_TOKEN} characters (openssl rand -hex 24 makes one)."
        )
    from prometheus_client import CollectorRegistry

    from kindling.observe.metrics import HttpMetrics
    from kindling.observe.tracing import start_tracing

    settings = settings or McpSettings.from_env()
    the_spans = spans if spans is not None else start_tracing("mcp")
    registry = CollectorRegistry(auto_describe=True) if metrics else None
    http_metrics = HttpMetrics(registry) if registry is not None else None
    tool_metrics = ToolMetrics(registry) if registry is not None else None
    server = create_server(settings, metrics=tool_metrics, spans=the_spans)
    app = server.streamable_http_app(host=host, transport_security=security)
    allowed = allowed_hosts(host, allow_hosts)
    guarded = ForgeryGuard(app, allowed)
    side = _side_app(settings, registry, token=token, metrics_token=metrics_token)
    return McpEdge(
        _BearerAuth(guarded, token) if token else guarded,
        ForgeryGuard(side, allowed),
        metrics=http_metrics,
        spans=the_spans,
        registry=registry,
    )


#: The variable holding the token good only for reading an MCP server's /metrics.
METRICS_TOKEN_ENV = "KINDLING_MCP_METRICS_TOKEN"
#: The shortest metrics token accepted (the daemon's rule).
MIN_METRICS_TOKEN = 16
#: The paths the HTTP server answers beside /mcp, without going through MCP's own app.
SIDE_ROUTES = frozenset({"/health", "/ready", "/metrics"})


class McpEdge:
    """The MCP server's HTTP entry: ``/health``, ``/ready`` and ``/metrics`` are answered by a
    small app of their own (``/health`` and ``/ready`` need no token; ``/metrics`` the metrics
    token or the server's bearer token, open only on loopback without any token, like the rest),
    everything else goes to MCP's streamable-HTTP app behind its bearer token. Every request is
    counted and timed by route (``/mcp``, the three above, ``unmatched``) and status, spanned when
    tracing is on, and given its log context."""

    def __init__(self, mcp: Any, side: Any, *, metrics: Any, spans: Any, registry: Any) -> None:
        self.mcp = mcp
        self.side = side
        self.metrics = metrics
        self.spans = spans
        self.registry = registry

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer one request (lifespan goes to MCP's app, which runs its session manager)."""
        if scope["type"] != "http":
            await self.mcp(scope, receive, send)
            return
        from kindling.edge import read_head
        from kindling.observe.asgi import observe_call
        from kindling.observe.metrics import UNMATCHED

        path = scope["path"]
        if path in SIDE_ROUTES:
            app, route = self.side, path
        else:
            app, route = self.mcp, "/mcp" if path.rstrip("/") == "/mcp" else UNMATCHED
        await observe_call(
            app,
            read_head(scope["headers"]),
            scope,
            receive,
            send,
            metrics=self.metrics,
            spans=self.spans,
            route=route,
        )

    def close(self) -> None:
        """Send the spans still buffered."""
        if self.spans is not None:
            self.spans.close()


def ready_problems(settings: McpSettings) -> list[str]:
    """What keeps the server from answering its tools, one sentence each: the template store does
    not open, a session source does not exist. Blocking: reads a directory or two."""
    problems = []
    try:
        _templates().list()
    except KindlingError as exc:
        problems.append(f"The template store does not open: {exc}")
    for source in settings.sources:
        if "://" not in source and not any(ch in source for ch in "*?[") and not Path(source).exists():
            problems.append(f"The session source {source} does not exist.")
    return problems


def _side_app(settings: McpSettings, registry: Any, *, token: str | None, metrics_token: str | None) -> Any:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, Response
    from starlette.requests import Request

    from kindling.observe.health import CachedReady, health_router
    from kindling.observe.metrics import render, token_matches

    async def ready() -> list[str]:
        return await anyio.to_thread.run_sync(ready_problems, settings)

    side = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    side.include_router(health_router(CachedReady(ready), info=lambda: {"service": "mcp"}))

    async def metrics(request: Request) -> Response:
        if registry is None:
            return JSONResponse(
                {"error": "metrics are off (kindling mcp --http --no-metrics)"}, status_code=404
            )
        authorization = request.headers.get("authorization")
        tokens = [t for t in (metrics_token, token) if t]
        if tokens and not any(token_matches(t, authorization) for t in tokens):
            return JSONResponse(
                {"error": "missing or wrong bearer token (the metrics token or the server's)"},
                status_code=401,
                headers={"www-authenticate": "Bearer"},
            )
        body, content_type = await anyio.to_thread.run_sync(render, registry)
        return Response(body, media_type=content_type)

    # A plain Starlette route: FastAPI would read the lazily imported annotations as a query field.
    side.add_route("/metrics", metrics, methods=["GET"])
    return side


class _BearerAuth:
    """ASGI wrapper: HTTP requests without ``Authorization: Bearer <token>`` get a 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                body = b'{"error": "missing or wrong bearer token"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def run_http(
    settings: McpSettings | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    log_level: str = "warning",
    allow_hosts: Sequence[str] = (),
    read_timeout: float = 20.0,
    log_format: str = "human",
    metrics: bool = True,
    metrics_token: str | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted; a request's headers and
    body must arrive within ``read_timeout`` seconds. Log lines go to stderr, human-readable or
    (``log_format="json"``) one JSON object a line. Raises ConfigError (see ``http_app``, for an
    unknown log format, and when the port is taken: said before anything is served)."""
    import uvicorn

    from kindling.httpguard import bind_socket, with_request_deadline
    from kindling.observe.logs import configure_logging

    configure_logging(log_level, log_format)
    app = http_app(
        settings,
        host=host,
        token=token,
        allow_hosts=allow_hosts,
        metrics=metrics,
        metrics_token=metrics_token,
    )
    sock = bind_socket(host, port)
    try:
        extra: dict[str, Any] = {} if log_format == "human" else {"log_config": None}
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, **extra)
        config.load()
        config.http_protocol_class = with_request_deadline(config.http_protocol_class, read_timeout)
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        app.close()
