"""The memory and skill tools a review (or any agent) may call: Hermes-compatible schemas and handlers.

Tool names and arguments follow Hermes Agent (``memory`` with action/target/content/old_text;
``skill_manage`` with action/name/content/category/old_string/new_string; ``skill_view``;
``skills_list``), so a model that learned Hermes's tools uses these the same way and the files
they write are the files Hermes reads.
"""

from __future__ import annotations

from typing import Any

from kindling.agent.registry import Tool, current_call, error_result, result_json
from kindling.review.memory import MemoryStore, Provenance
from kindling.review.skills import SkillStore

MEMORY_TOOLSET = "memory"
SKILLS_TOOLSET = "skills"
MEMORY_TOOL = "memory"
SKILL_MANAGE_TOOL = "skill_manage"
SKILL_VIEW_TOOL = "skill_view"
SKILLS_LIST_TOOL = "skills_list"
MEMORY_TOOLS: frozenset[str] = frozenset({MEMORY_TOOL})
SKILL_TOOLS: frozenset[str] = frozenset({SKILL_MANAGE_TOOL, SKILL_VIEW_TOOL, SKILLS_LIST_TOOL})

MEMORY_SCHEMA: dict[str, Any] = {
    "name": MEMORY_TOOL,
    "description": (
        "Keep durable facts across sessions. Target 'user' holds who the user is (name, role, "
        "preferences, how they like to work); target 'memory' holds your own notes (environment "
        "facts, project conventions, tool quirks, lessons). Entries are short declarative facts. "
        "Actions: add (content), replace (old_text = a short unique part of the entry, content = "
        "the new entry), remove (old_text). A write that would pass the size limit is refused: "
        "replace or remove stale entries first. Skip trivia, task progress and raw data."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove"], "description": "What to do."},
            "target": {
                "type": "string",
                "enum": ["memory", "user"],
                "description": "'memory' for your notes, 'user' for the user profile.",
            },
            "content": {"type": "string", "description": "The entry text, for add and replace."},
            "old_text": {
                "type": "string",
                "description": "A short unique substring of the entry to replace or remove.",
            },
        },
        "required": ["action", "target"],
    },
}

SKILL_MANAGE_SCHEMA: dict[str, Any] = {
    "name": SKILL_MANAGE_TOOL,
    "description": (
        "Create and maintain skills: reusable procedures for a class of task, stored as SKILL.md "
        "with YAML front matter (name and description required; version and tags optional) then "
        "the instructions. Actions: create (name, content, optional category), patch (name, "
        "old_string, new_string: a targeted fix), edit (name, content: full rewrite), delete "
        "(name). Prefer patching an existing skill over creating a near-duplicate. Names use "
        "lowercase letters, digits, '.', '_' and '-'."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["create", "patch", "edit", "delete"]},
            "name": {"type": "string", "description": "The skill name, e.g. 'deploy-static-site'."},
            "content": {"type": "string", "description": "Full SKILL.md text, for create and edit."},
            "category": {"type": "string", "description": "Optional category directory, for create."},
            "old_string": {"type": "string", "description": "Exact text to replace, for patch."},
            "new_string": {"type": "string", "description": "Replacement text, for patch."},
        },
        "required": ["action", "name"],
    },
}

SKILL_VIEW_SCHEMA: dict[str, Any] = {
    "name": SKILL_VIEW_TOOL,
    "description": "Read one skill's SKILL.md before changing it.",
    "parameters": {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The skill name."}},
        "required": ["name"],
    },
}

SKILLS_LIST_SCHEMA: dict[str, Any] = {
    "name": SKILLS_LIST_TOOL,
    "description": "List every skill with its category and description.",
    "parameters": {"type": "object", "properties": {}},
}


def memory_tool(store: MemoryStore | None = None, *, provenance: Provenance | None = None) -> Tool:
    """Return the ``memory`` tool over ``store``; every write logs ``provenance`` plus the call id."""
    memory = store or MemoryStore()
    base = provenance or Provenance()

    def handle(args: dict[str, Any]) -> str:
        call = current_call()
        stamped = base.with_call(
            tool_name=call.tool_name if call else MEMORY_TOOL,
            tool_call_id=call.tool_call_id if call else None,
        )
        if "operations" in args and "action" not in args:
            return error_result("Batched 'operations' are not supported here: make one call per change.")
        action = args.get("action")
        target = args.get("target", "memory")
        if not isinstance(action, str) or not isinstance(target, str):
            return error_result("'action' and 'target' must be strings.")
        content, old_text = args.get("content"), args.get("old_text")
        if (content is not None and not isinstance(content, str)) or (
            old_text is not None and not isinstance(old_text, str)
        ):
            return error_result("'content' and 'old_text' must be strings.")
        return result_json(
            memory.apply(action, target, content=content, old_text=old_text, provenance=stamped)
        )

    return Tool(MEMORY_TOOL, MEMORY_TOOLSET, MEMORY_SCHEMA, handle)


def skill_tools(store: SkillStore | None = None, *, archive_deletes: bool = False) -> list[Tool]:
    """Return the ``skill_manage``, ``skill_view`` and ``skills_list`` tools over ``store``.

    With ``archive_deletes`` a ``delete`` moves the skill under ``.archive/`` instead of
    removing it, for runs with no person watching (a background review).
    """
    skills = store or SkillStore()

    def manage(args: dict[str, Any]) -> str:
        action, name = args.get("action"), args.get("name")
        if not isinstance(action, str) or not isinstance(name, str):
            return error_result("'action' and 'name' must be strings.")
        text = {k: args.get(k) for k in ("content", "category", "old_string", "new_string")}
        if any(v is not None and not isinstance(v, str) for v in text.values()):
            return error_result("'content', 'category', 'old_string' and 'new_string' must be strings.")
        if action == "create":
            return result_json(skills.create(name, text["content"] or "", text["category"] or None))
        if action == "edit":
            return result_json(skills.edit(name, text["content"] or ""))
        if action == "patch":
            return result_json(skills.patch(name, text["old_string"] or "", text["new_string"] or ""))
        if action == "delete":
            return result_json(skills.delete(name, archive=archive_deletes))
        if action == "view":
            return result_json(skills.view(name))
        return error_result(f"Unknown action '{action}'. Use: create, patch, edit, delete.")

    def view(args: dict[str, Any]) -> str:
        name = args.get("name")
        if not isinstance(name, str):
            return error_result("'name' must be a string.")
        return result_json(skills.view(name))

    def list_all(args: dict[str, Any]) -> str:
        return result_json(skills.list_result())

    return [
        Tool(SKILL_MANAGE_TOOL, SKILLS_TOOLSET, SKILL_MANAGE_SCHEMA, manage),
        Tool(SKILL_VIEW_TOOL, SKILLS_TOOLSET, SKILL_VIEW_SCHEMA, view),
        Tool(SKILLS_LIST_TOOL, SKILLS_TOOLSET, SKILLS_LIST_SCHEMA, list_all),
    ]


def review_tools(
    memory_store: MemoryStore | None = None,
    skill_store: SkillStore | None = None,
    *,
    provenance: Provenance | None = None,
    memory: bool = True,
    skills: bool = True,
) -> list[Tool]:
    """Return the tools a review may call: the memory tool and/or the skill tools.

    A review's skill ``delete`` archives (see :func:`skill_tools`).
    """
    tools: list[Tool] = []
    if memory:
        tools.append(memory_tool(memory_store, provenance=provenance))
    if skills:
        # Nobody watches a review: a skill it retires must stay recoverable (Hermes archives too).
        tools.extend(skill_tools(skill_store, archive_deletes=True))
    return tools
