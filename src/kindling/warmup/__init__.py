"""kindling.warmup: choose examples for a new task, build valid messages, inject them."""

from __future__ import annotations

from kindling.warmup.build import STYLES, build_conversation, render_example
from kindling.warmup.convert import to_anthropic
from kindling.warmup.inject import inject, validate_conversation
from kindling.warmup.plan import choose_template, plan_examples
from kindling.warmup.select import rank_examples, select_examples
from kindling.warmup.tokens import estimate_conversation_tokens, estimate_tokens
from kindling.warmup.warm import WarmResult, inject_warm, tool_names, warm, warm_conversation

__all__ = [
    "STYLES",
    "WarmResult",
    "build_conversation",
    "choose_template",
    "estimate_conversation_tokens",
    "estimate_tokens",
    "inject",
    "inject_warm",
    "plan_examples",
    "rank_examples",
    "render_example",
    "select_examples",
    "to_anthropic",
    "tool_names",
    "validate_conversation",
    "warm",
    "warm_conversation",
]
