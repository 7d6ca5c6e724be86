"""The instructions a background review appends to the conversation it looks back on.

They are kindling's own wording. They deliberately do not open with Hermes Agent's review-prompt
text ("Review the conversation above ..."): Hermes strips messages that start that way from its
session logs, and a kindling review must stay visible wherever its transcript is stored.
"""

from __future__ import annotations

HERMES_PROMPT_PREFIX = "Review the conversation above"

_MEMORY_PART = (
    "MEMORY — who the user is and what stays true:\n"
    "- Did the user say who they are, what they want, or what they prefer (tools, style, tone, "
    "format)? Did they correct you or state how you should work? Save that to target 'user'.\n"
    "- Did you learn a stable fact about their environment, project conventions or a tool's "
    "quirk that would save time next session? Save that to target 'memory'.\n"
    "- Write short declarative facts ('The user prefers pytest over unittest'), not orders to "
    "yourself. Replace an entry that is now wrong instead of adding a contradicting one.\n"
)

_SKILL_PART = (
    "SKILLS — how this kind of work is done:\n"
    "- Did a non-trivial procedure, fix or workaround emerge that applies to a whole class of "
    "tasks? Patch the skill that covers it (look with skills_list and skill_view first), or "
    "create one when none does.\n"
    "- Capture what worked, never a list of dead ends, and nothing specific to this one task.\n"
)

_OPENING = (
    "Background self-improvement pass (kindling). Look back over this session and keep only what "
    "will help a future session start out knowing it.\n\n"
)

_CLOSING = (
    "\nUse only the tools named above; anything else is denied. Make each change once. When "
    "nothing is worth keeping, answer exactly 'Nothing to save.' and stop."
)

MEMORY_REVIEW_PROMPT = _OPENING + _MEMORY_PART + _CLOSING.replace("the tools named above", "the memory tool")
SKILL_REVIEW_PROMPT = (
    _OPENING
    + _SKILL_PART
    + _CLOSING.replace("the tools named above", "skills_list, skill_view and skill_manage")
)
COMBINED_REVIEW_PROMPT = (
    _OPENING
    + _MEMORY_PART
    + "\n"
    + _SKILL_PART
    + _CLOSING.replace("the tools named above", "memory, skills_list, skill_view and skill_manage")
)


def review_prompt(*, memory: bool, skills: bool) -> str:
    """Return the prompt for a memory review, a skill review, or both at once.

    Raises ValueError when neither is asked for.
    """
    if memory and skills:
        return COMBINED_REVIEW_PROMPT
    if memory:
        return MEMORY_REVIEW_PROMPT
    if skills:
        return SKILL_REVIEW_PROMPT
    raise ValueError("A review needs memory, skills, or both.")
