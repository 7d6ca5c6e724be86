"""kindling.agent: a tool-calling loop over any OpenAI-compatible endpoint, and its tool registry."""

from kindling.agent.loop import RunResult, Runtime, Usage, run
from kindling.agent.registry import DANGEROUS_TOOLS, CallContext, Dispatch, Tool, ToolRegistry, current_call

__all__ = [
    "DANGEROUS_TOOLS",
    "CallContext",
    "Dispatch",
    "RunResult",
    "Runtime",
    "Tool",
    "ToolRegistry",
    "Usage",
    "current_call",
    "run",
]
