"""kindling.agent: a tool-calling loop over any OpenAI-compatible endpoint, and its tool registry."""

import logging

from kindling.agent.loop import RunResult, Runtime, Usage, run
from kindling.agent.registry import DANGEROUS_TOOLS, CallContext, Dispatch, Tool, ToolRegistry, current_call

# A library must not print: without this, an app that never configured logging would get
# retry warnings and tool errors on stderr (Python's last-resort handler), in the middle of
# its own output. Configured logging still receives every record.
logging.getLogger(__name__).addHandler(logging.NullHandler())

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
