"""kindling.review: after a turn, a restricted background review keeps memories and skills.

Memories go to Hermes Agent's ``MEMORY.md``/``USER.md`` and skills to ``SKILL.md`` files under
``$HERMES_HOME``, so Hermes reads what kindling writes and the other way round.
"""

import logging

from kindling.review.loop import (
    ReviewExecutor,
    ReviewHandle,
    ReviewOutcome,
    ReviewPlan,
    ReviewTriggers,
    default_executor,
    format_summary,
    run_review,
    spawn_review,
    summarize_actions,
)
from kindling.review.memory import ENTRY_DELIMITER, MemoryStore, Provenance, memories_dir
from kindling.review.prompts import review_prompt
from kindling.review.protocol import ConversionReport, repair_tool_protocol
from kindling.review.session import review_session, review_stored, session_messages
from kindling.review.skills import Skill, SkillStore, skills_dir, validate_skill_name
from kindling.review.tools import memory_tool, review_tools, skill_tools

# A background review runs inside someone else's program: its failures go to the callback and
# to configured logging, never straight onto that program's stderr (see kindling.agent).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "ENTRY_DELIMITER",
    "ConversionReport",
    "MemoryStore",
    "Provenance",
    "ReviewExecutor",
    "ReviewHandle",
    "ReviewOutcome",
    "ReviewPlan",
    "ReviewTriggers",
    "Skill",
    "SkillStore",
    "default_executor",
    "format_summary",
    "memories_dir",
    "memory_tool",
    "repair_tool_protocol",
    "review_prompt",
    "review_session",
    "review_stored",
    "review_tools",
    "run_review",
    "session_messages",
    "skill_tools",
    "skills_dir",
    "spawn_review",
    "summarize_actions",
    "validate_skill_name",
]
