"""kindling: experience from turn zero for tool-calling LLM agents.

The public API, re-exported here. Names load on first use, so ``import kindling`` stays cheap and
the CLI starts fast; ``from kindling import mine`` works as usual.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from kindling.errors import (
    ConfigError,
    ConfirmError,
    ConversationError,
    EndpointError,
    InvalidNameError,
    KindlingError,
    ModelContextError,
    NotFoundError,
    ReviewError,
    ScheduleError,
    SourceError,
    StoreError,
    TemplateError,
    ToolCallError,
    UnknownFormatError,
)
from kindling.version import kindling_version

__version__ = kindling_version()

# A library stays quiet unless its host configures logging; kindling's failures also reach
# callers through results and callbacks, never only through the log.
logging.getLogger("kindling").addHandler(logging.NullHandler())

# name -> module that defines it; resolved lazily by __getattr__.
_LAZY: dict[str, str] = {
    # sessions
    "Session": "kindling.sessions",
    "Message": "kindling.sessions",
    "ToolCall": "kindling.sessions",
    "ReadReport": "kindling.sessions",
    "iter_sessions": "kindling.sessions",
    "detect_format": "kindling.sessions",
    "find_session": "kindling.sessions",
    "generate_sample_db": "kindling.sessions",
    # mining
    "mine": "kindling.mining",
    "mine_source": "kindling.mining",
    "mine_sources": "kindling.mining",
    "MiningResult": "kindling.mining",
    "MiningStats": "kindling.mining",
    "compute_stats": "kindling.mining",
    "classify_outcome": "kindling.mining",
    "Outcome": "kindling.mining",
    "OutcomeStatus": "kindling.mining",
    "Example": "kindling.mining",
    "TaskType": "kindling.mining",
    "classify_calls": "kindling.mining",
    "classify_task_text": "kindling.mining",
    "wilson_interval": "kindling.mining",
    # templates
    "Template": "kindling.templates",
    "TemplateStore": "kindling.templates",
    "JsonDirStore": "kindling.templates",
    "SqlStore": "kindling.templates",
    "open_template_store": "kindling.templates.store:open_store",
    "build_template": "kindling.templates.build",
    "export_template": "kindling.templates",
    "parse_template": "kindling.templates",
    # warm-up
    "warm": "kindling.warmup",
    "warm_conversation": "kindling.warmup",
    "WarmResult": "kindling.warmup",
    "select_examples": "kindling.warmup",
    "choose_template": "kindling.warmup",
    "build_conversation": "kindling.warmup",
    "inject": "kindling.warmup",
    "inject_warm": "kindling.warmup",
    "validate_conversation": "kindling.warmup",
    "to_anthropic": "kindling.warmup",
    "estimate_tokens": "kindling.warmup",
    # agent
    "Runtime": "kindling.agent",
    "RunResult": "kindling.agent",
    "Tool": "kindling.agent",
    "ToolRegistry": "kindling.agent",
    "run_agent": "kindling.agent.loop:run",
    # review
    "spawn_review": "kindling.review",
    "run_review": "kindling.review",
    "review_session": "kindling.review",
    "ReviewOutcome": "kindling.review",
    "ReviewHandle": "kindling.review",
    "ReviewTriggers": "kindling.review",
    "summarize_actions": "kindling.review",
    "MemoryStore": "kindling.review",
    "SkillStore": "kindling.review",
    # confirm
    "ConfirmClient": "kindling.confirm",
    "ConfirmationStore": "kindling.confirm",
    "ConfirmSettings": "kindling.confirm",
    "Decision": "kindling.confirm",
    "HIGH_RISK_ACTIONS": "kindling.confirm",
    # cron
    "Job": "kindling.cron",
    "make_job": "kindling.cron",
    "open_job_store": "kindling.cron",
    "tick": "kindling.cron",
    "run_job_now": "kindling.cron",
    "parse_schedule": "kindling.cron",
    "check_model_context": "kindling.cron",
    "classify_runtime": "kindling.cron",
    "detect_provider_mismatch": "kindling.cron",
    "build_job_prompt": "kindling.cron",
    "MIN_CONTEXT_TOKENS": "kindling.cron",
    # agent-facing tools
    "kindling_tools": "kindling.integrations.tools",
    "warm_session": "kindling.integrations.tools",
    "request_confirmation": "kindling.integrations.tools",
}

__all__ = [
    "HIGH_RISK_ACTIONS",
    "MIN_CONTEXT_TOKENS",
    "ConfigError",
    "ConfirmClient",
    "ConfirmError",
    "ConfirmSettings",
    "ConfirmationStore",
    "ConversationError",
    "Decision",
    "EndpointError",
    "Example",
    "InvalidNameError",
    "Job",
    "JsonDirStore",
    "KindlingError",
    "MemoryStore",
    "Message",
    "MiningResult",
    "MiningStats",
    "ModelContextError",
    "NotFoundError",
    "Outcome",
    "OutcomeStatus",
    "ReadReport",
    "ReviewError",
    "ReviewHandle",
    "ReviewOutcome",
    "ReviewTriggers",
    "RunResult",
    "Runtime",
    "ScheduleError",
    "Session",
    "SkillStore",
    "SourceError",
    "SqlStore",
    "StoreError",
    "TaskType",
    "Template",
    "TemplateError",
    "TemplateStore",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolRegistry",
    "UnknownFormatError",
    "WarmResult",
    "__version__",
    "build_conversation",
    "build_job_prompt",
    "build_template",
    "check_model_context",
    "choose_template",
    "classify_calls",
    "classify_outcome",
    "classify_runtime",
    "classify_task_text",
    "compute_stats",
    "detect_format",
    "detect_provider_mismatch",
    "estimate_tokens",
    "export_template",
    "find_session",
    "generate_sample_db",
    "inject",
    "inject_warm",
    "iter_sessions",
    "kindling_tools",
    "make_job",
    "mine",
    "mine_source",
    "mine_sources",
    "open_job_store",
    "open_template_store",
    "parse_schedule",
    "parse_template",
    "request_confirmation",
    "review_session",
    "run_agent",
    "run_job_now",
    "run_review",
    "select_examples",
    "spawn_review",
    "summarize_actions",
    "tick",
    "to_anthropic",
    "validate_conversation",
    "warm",
    "warm_conversation",
    "warm_session",
    "wilson_interval",
]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'kindling' has no attribute {name!r}")
    module_name, _, attribute = target.partition(":")
    value = getattr(importlib.import_module(module_name), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # pragma: no cover - static names for type checkers and IDEs
    from kindling.agent import RunResult, Runtime, Tool, ToolRegistry
    from kindling.agent.loop import run as run_agent
    from kindling.confirm import (
        HIGH_RISK_ACTIONS,
        ConfirmationStore,
        ConfirmClient,
        ConfirmSettings,
        Decision,
    )
    from kindling.cron import (
        MIN_CONTEXT_TOKENS,
        Job,
        build_job_prompt,
        check_model_context,
        classify_runtime,
        detect_provider_mismatch,
        make_job,
        open_job_store,
        parse_schedule,
        run_job_now,
        tick,
    )
    from kindling.integrations.tools import kindling_tools, request_confirmation, warm_session
    from kindling.mining import (
        Example,
        MiningResult,
        MiningStats,
        Outcome,
        OutcomeStatus,
        TaskType,
        classify_calls,
        classify_outcome,
        classify_task_text,
        compute_stats,
        mine,
        mine_source,
        mine_sources,
        wilson_interval,
    )
    from kindling.review import (
        MemoryStore,
        ReviewHandle,
        ReviewOutcome,
        ReviewTriggers,
        SkillStore,
        review_session,
        run_review,
        spawn_review,
        summarize_actions,
    )
    from kindling.sessions import (
        Message,
        ReadReport,
        Session,
        ToolCall,
        detect_format,
        find_session,
        generate_sample_db,
        iter_sessions,
    )
    from kindling.templates import (
        JsonDirStore,
        SqlStore,
        Template,
        TemplateStore,
        export_template,
        parse_template,
    )
    from kindling.templates.build import build_template
    from kindling.templates.store import open_store as open_template_store
    from kindling.warmup import (
        WarmResult,
        build_conversation,
        choose_template,
        estimate_tokens,
        inject,
        inject_warm,
        select_examples,
        to_anthropic,
        validate_conversation,
        warm,
        warm_conversation,
    )
