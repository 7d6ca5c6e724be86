"""Past agent sessions, read from where they live into one canonical model.

``iter_sessions(source)`` streams ``Session`` objects from a Hermes ``state.db`` (SQLite, or the
same tables through a ``postgresql://`` URL), a Hermes session export, ShareGPT trajectories,
OpenAI chat logs, or tau-bench / tau2-bench results. ``generate_sample_db`` writes a realistic
Hermes-style database for trying everything without Hermes.
"""

from __future__ import annotations

from kindling.sessions.model import ROLES, Message, ReadReport, Role, Session, ToolCall
from kindling.sessions.sample import (
    default_sample_path,
    generate_sample_db,
    is_sample_db,
    sample_info,
    sample_task_types,
)
from kindling.sessions.sources import (
    FORMATS,
    LATEST,
    detect_format,
    find_session,
    find_session_in,
    iter_sessions,
    latest_session,
    resolve_session_id,
    resolve_source,
    summarize_source,
)

__all__ = [
    "FORMATS",
    "LATEST",
    "ROLES",
    "Message",
    "ReadReport",
    "Role",
    "Session",
    "ToolCall",
    "default_sample_path",
    "detect_format",
    "find_session",
    "find_session_in",
    "generate_sample_db",
    "is_sample_db",
    "iter_sessions",
    "latest_session",
    "resolve_session_id",
    "resolve_source",
    "sample_info",
    "sample_task_types",
    "summarize_source",
]
