"""The public API re-exported from ``kindling`` and the agent-facing tools in one registry."""

from __future__ import annotations

import json
import subprocess
import sys

import kindling
from kindling.agent import ToolRegistry
from kindling.integrations.tools import TOOL_SCHEMAS, kindling_tools

EXPECTED_PUBLIC = {
    # errors
    "KindlingError", "ConfigError", "InvalidNameError", "NotFoundError", "SourceError", "UnknownFormatError",
    "StoreError", "TemplateError", "ConversationError", "EndpointError", "ReviewError", "ConfirmError",
    "ScheduleError", "ModelContextError", "ToolCallError", "__version__",
    # sessions
    "Session", "Message", "ToolCall", "ReadReport", "iter_sessions", "detect_format", "find_session",
    "generate_sample_db",
    # mining
    "mine", "mine_source", "mine_sources", "MiningResult", "MiningStats", "compute_stats", "classify_outcome", "Outcome", "OutcomeStatus",
    "Example", "TaskType", "classify_calls", "classify_task_text", "wilson_interval",
    # templates and warm-up
    "Template", "TemplateStore", "JsonDirStore", "SqlStore", "open_template_store", "build_template",
    "export_template", "parse_template", "warm", "warm_conversation", "WarmResult", "select_examples",
    "choose_template", "build_conversation", "inject", "inject_warm", "validate_conversation", "to_anthropic",
    "estimate_tokens",
    # agent and review
    "Runtime", "RunResult", "Tool", "ToolRegistry", "run_agent", "spawn_review", "run_review", "review_session",
    "ReviewOutcome", "ReviewHandle", "ReviewTriggers", "summarize_actions", "MemoryStore", "SkillStore",
    # confirm
    "ConfirmClient", "ConfirmationStore", "ConfirmSettings", "Decision", "HIGH_RISK_ACTIONS",
    # cron
    "Job", "make_job", "open_job_store", "tick", "run_job_now", "parse_schedule", "check_model_context",
    "classify_runtime", "detect_provider_mismatch", "build_job_prompt", "MIN_CONTEXT_TOKENS",
    # agent-facing tools
    "kindling_tools", "warm_session", "request_confirmation",
}  # fmt: skip


def test_public_names_are_exactly_the_documented_set() -> None:
    assert set(kindling.__all__) == EXPECTED_PUBLIC
    assert len(kindling.__all__) == len(EXPECTED_PUBLIC), "duplicate names in __all__"


def test_every_public_name_resolves_to_the_real_object() -> None:
    from kindling.agent.loop import run
    from kindling.templates.store import open_store

    for name in kindling.__all__:
        assert getattr(kindling, name) is not None, name
    assert kindling.run_agent is run
    assert kindling.open_template_store is open_store


def test_import_kindling_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, kindling, kindling.cli.main; "
        "print(sorted(m for m in ('fastapi', 'openai', 'bm25s', 'matplotlib', 'apprise', 'mcp', 'mcp_types') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_kindling_tools_dispatch_through_a_registry() -> None:
    registry = ToolRegistry.of(kindling_tools(), toolsets=["kindling"])
    assert registry.names() == sorted(schema["name"] for schema in TOOL_SCHEMAS)
    assert {t["function"]["name"] for t in registry.openai_tools()} == {
        "warm_session",
        "request_confirmation",
    }

    listed = json.loads(registry.dispatch("warm_session", {"action": "list"}, call_id="c1"))
    assert listed["success"] is True
    assert listed["templates"] == []


def test_confirmation_tool_reports_an_unreachable_daemon_without_raising(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KINDLING_CONFIRM_URL", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("KINDLING_CONFIRM_TOKEN", "t")
    registry = ToolRegistry.of(kindling_tools())
    result = json.loads(
        registry.dispatch("request_confirmation", {"action": "deploy_production", "description": "ship v2"})
    )
    assert result["success"] is False
    assert result["error"]


def test_library_logging_stays_off_stderr_unless_configured() -> None:
    code = "import logging, kindling; logging.getLogger('kindling.review').warning('should not print')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stderr == ""
