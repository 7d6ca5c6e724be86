"""kindling: experience from turn zero for tool-calling LLM agents."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
