"""The warm-up pipeline: choose a template, plan its examples, fit the budget, build, inject."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kindling.errors import ConversationError, NotFoundError, TemplateError
from kindling.mining.model import Lesson
from kindling.templates.model import Template
from kindling.templates.store import TemplateStore, open_store
from kindling.warmup.build import build_conversation, check_style, lesson_line, lessons_message
from kindling.warmup.convert import to_anthropic
from kindling.warmup.inject import inject, validate_conversation
from kindling.warmup.lessons import LESSON_SHARE, lessons_cost, rank_lessons, within_share
from kindling.warmup.plan import Plan, choose_template, plan_examples, why_template
from kindling.warmup.query import Query, as_query
from kindling.warmup.select import DEFAULT_BUDGET, DEFAULT_MAX_EXAMPLES, Selection, fill_budget
from kindling.warmup.tokens import estimate_conversation_tokens, estimate_message_tokens

__all__ = ["WarmResult", "find_task", "inject_warm", "tool_names", "warm", "warm_conversation"]


@dataclass
class WarmResult:
    """A warm conversation and why: which template, which past tasks, which tools, at what cost.

    ``evidence`` maps each tool the agent has to the probability the past tasks give it for this
    task; ``past_tasks`` lists the past tasks the examples came from (most similar first);
    ``reason`` says how the tools were chosen and ``template_reason`` why this template;
    ``general`` is True when the examples are the general list, not matched to the task.
    ``lessons`` lists the lessons shown (tool, error class, sessions, sessions with a fix, and the
    provenance of the pair shown: source, session, tenant, verified).
    """

    template: Template
    messages: list[dict[str, Any]]
    estimated_tokens: int
    budget: int
    style: str
    tools: list[str] = field(default_factory=list)
    past_tasks: list[dict[str, Any]] = field(default_factory=list)
    evidence: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    template_reason: str = ""
    lessons: list[dict[str, Any]] = field(default_factory=list)
    general: bool = False

    def as_dict(self, fmt: str = "openai") -> dict[str, Any]:
        """Return ``{"template", "messages", "estimated_tokens", "why", ...}``; ``fmt="anthropic"`` converts."""
        data: dict[str, Any] = {
            "template": self.template.name,
            "template_version": self.template.version,
            "messages": self.messages,
            "estimated_tokens": self.estimated_tokens,
            "budget": self.budget,
            "style": self.style,
            "tools": self.tools,
            "lessons": self.lessons,
            "why": {
                "template": self.template_reason or "named by the caller",
                "tools": self.reason,
                "general": self.general,
                "past_tasks": self.past_tasks,
                "evidence": self.evidence,
            },
        }
        if fmt == "anthropic":
            converted = to_anthropic(self.messages)
            data["system"] = converted["system"]
            data["messages"] = converted["messages"]
        elif fmt != "openai":
            raise ConversationError(f"Unknown message format {fmt!r}; use openai or anthropic.")
        return data


def tool_names(tools: Any) -> list[str]:
    """Return the function names of a chat-completions ``tools`` array (``[{"type": "function",
    "function": {"name": ...}}]``; bare ``{"name": ...}`` entries too). Raises ConversationError
    when it is not such a list."""
    if not isinstance(tools, list):
        raise ConversationError('"tools" must be a list of tool definitions.')
    names: list[str] = []
    for item in tools:
        function = item.get("function") if isinstance(item, Mapping) else None
        name = (function or item).get("name") if isinstance(function or item, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ConversationError('Every entry of "tools" needs a function name.')
        names.append(name)
    return names


def warm_conversation(
    template: Template,
    task: str | Query,
    *,
    budget: int = DEFAULT_BUDGET,
    style: str = "triples",
    include_system: bool = True,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    tools: Collection[str] | None = None,
    lessons: bool = True,
) -> WarmResult:
    """Return the warm conversation for ``task`` from ``template`` (pure: no store, no usage count).

    ``tools`` is the agent's tools (None: any): no other tool is shown. With ``lessons``, the
    template's lessons for the tools shown follow the examples (``kindling.warmup.lessons``): at
    most a quarter of the tokens, and never at the cost of a tool the examples would show without
    them. The messages pass ``validate_conversation`` and their estimated tokens never exceed
    ``budget``. ``task`` is the text or, parsed once for the whole warm-up, a ``Query``.
    Raises ConversationError for an unknown style or a negative budget.
    """
    check_style(style)
    if budget < 0:
        raise ConversationError(f"The token budget must be zero or more, not {budget}.")
    system_prompt = template.system_prompt_addendum if include_system else None
    plan = plan_examples(template, task, max_examples=max_examples, tools=tools)

    def fill(tokens: int) -> Selection:
        return fill_budget(
            plan.candidates,
            budget=tokens,
            style=style,
            max_examples=max_examples,
            system_prompt=system_prompt,
        )

    def render(chosen: Selection, lines: Sequence[str] = ()) -> list[dict[str, Any]]:
        return build_conversation(
            chosen.shown,
            style=style,
            system_prompt=system_prompt,
            budget=budget,
            example_tokens=chosen.example_tokens,
            seed=f"{template.name}:{template.version}",
            lessons=lines,
        )

    selection = fill(budget)
    messages = render(selection)
    shown_lessons: list[Lesson] = []
    if lessons and template.lessons and selection.examples:
        selection, messages, shown_lessons = _with_lessons(
            template, plan, selection, messages, budget, fill, render, tools
        )
    shown = list(dict.fromkeys(e.tool_name for e in selection.examples))
    sessions = {s.past_task or s.example.session_id for s in selection.shown}
    past = [p for p in plan.past_tasks if p["session_id"] in sessions]
    return WarmResult(
        template,
        messages,
        estimate_conversation_tokens(messages),
        budget,
        style,
        shown,
        past,
        plan.evidence,
        plan.reason,
        lessons=[_shown_lesson(x) for x in shown_lessons],
        general=plan.general,
    )


def _shown_lesson(lesson: Lesson) -> dict[str, Any]:
    """A lesson as a warm-up reports it: its class and counts, and where the pair shown came from."""
    data: dict[str, Any] = {
        "tool": lesson.tool_name,
        "error_class": lesson.error_class,
        "sessions": lesson.sessions,
        "fixed": lesson.fixed,
    }
    if lesson.pairs:
        pair = lesson.pairs[0]
        data["provenance"] = {
            "source": pair.source,
            "session_id": pair.session_id,
            "tenant": pair.tenant,
            "verified": pair.verified,
        }
    return data


def _with_lessons(
    template: Template,
    plan: Plan,
    selection: Selection,
    messages: list[dict[str, Any]],
    budget: int,
    fill: Callable[[int], Selection],
    render: Callable[[Selection, Sequence[str]], list[dict[str, Any]]],
    agent_tools: Collection[str] | None = None,
) -> tuple[Selection, list[dict[str, Any]], list[Lesson]]:
    """Return the selection and messages with the lessons that fit, and those lessons.

    The lessons' block takes at most a quarter of the warm-up's tokens; the examples are chosen again
    in what is left, and the lessons are kept only while those examples still show every tool the
    warm-up showed without them (the last lesson goes first).
    """
    tools = list(dict.fromkeys(e.tool_name for e in selection.examples))
    ranked = rank_lessons(template.lessons, tools, plan.evidence, agent_tools)
    if not ranked:
        return selection, messages, []
    base = estimate_conversation_tokens(messages)
    cap = min(int(budget * LESSON_SHARE), base // 3)
    chosen = list(ranked)
    lines = within_share(chosen, cap)
    kept = [lesson for lesson in chosen if lesson_line(lesson) in lines]
    needed = set(tools)
    while lines:
        cost = lessons_cost(lines)
        again = fill(budget - cost)
        with_lessons = render(again, lines)
        total = estimate_conversation_tokens(with_lessons)
        block = next((m for m in with_lessons if m.get("content") == lessons_message(lines)["content"]), None)
        if (
            block is not None
            and needed <= {e.tool_name for e in again.examples}
            and total <= budget
            and estimate_message_tokens(block) <= LESSON_SHARE * total
        ):
            return again, with_lessons, kept
        lines.pop()
        kept.pop()
    return selection, messages, []


def _resolve(
    store: TemplateStore, name: str | None, task: Query, tools: Collection[str] | None
) -> tuple[Template, str]:
    if name:
        return store.get(name), "named by the caller"
    templates = store.list()
    chosen = choose_template(templates, task, tools=tools)
    if chosen is None:
        which = "examples" if tools is None else "examples of the agent's tools"
        raise NotFoundError(
            f"No template with {which} in {store.location}; build one with `kindling build NAME SOURCE`.",
            kind="template",
            name="--auto",
        )
    return chosen, why_template(chosen, task, len(templates))


def warm(
    name: str | None,
    task: str | Query,
    *,
    store: TemplateStore | None = None,
    budget: int = DEFAULT_BUDGET,
    style: str = "triples",
    include_system: bool = True,
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    record_use: bool = True,
    tools: Collection[str] | None = None,
    lessons: bool = True,
) -> WarmResult:
    """Warm a session for ``task`` from template ``name`` (or the best one when ``name`` is None).

    The one way in: the CLI, the Hermes plugin, the proxy and the MCP tool all warm through here.
    ``tools`` is the agent's tools (None: any): no other tool is shown, and without a name only
    templates with an example of one of them are considered; ``lessons`` adds the template's
    lessons for the tools shown (``warm_conversation``). Records one use of the template unless
    ``record_use`` is False. Raises NotFoundError when the template (or, for auto, any template)
    is missing, ConversationError for bad options.
    """
    store = store or open_store()
    query = as_query(task)  # scrubbed and split once, for the choice and the plan
    template, why = _resolve(store, name, query, tools)
    result = warm_conversation(
        template,
        query,
        budget=budget,
        style=style,
        include_system=include_system,
        max_examples=max_examples,
        tools=tools,
        lessons=lessons,
    )
    result.template_reason = why
    if record_use:
        count = store.record_use(template.name)
        result.template = template.model_copy(update={"usage_count": count})
    return result


def find_task(conversation: Sequence[Mapping[str, Any]]) -> str:
    """Return the task text of a conversation: its first user message's own words ("" when none),
    without the notes an agent's harness adds to it (``request_text``)."""
    from kindling.mining.tasktype import request_text

    for message in conversation:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return request_text(
                    " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
                )
            return request_text(str(content or ""))
    return ""


def inject_warm(
    conversation: Sequence[Mapping[str, Any]],
    name: str | None = None,
    *,
    task: str | None = None,
    store: TemplateStore | None = None,
    budget: int = DEFAULT_BUDGET,
    style: str = "triples",
    max_examples: int = DEFAULT_MAX_EXAMPLES,
    record_use: bool = True,
    tools: Collection[str] | None = None,
    lessons: bool = True,
) -> tuple[list[dict[str, Any]], WarmResult]:
    """Return ``conversation`` with warm messages inserted after its leading system messages.

    The task defaults to the conversation's first user message; ``tools`` (the agent's tools)
    limits what is shown; ``lessons`` adds the template's lessons (``warm_conversation``). The input is validated first and the result after, so a broken
    conversation is reported rather than passed on. Raises ConversationError, NotFoundError or
    TemplateError.
    """
    validate_conversation(conversation)
    task_text = task if task is not None else find_task(conversation)
    result = warm(
        name,
        task_text,
        store=store,
        budget=budget,
        style=style,
        max_examples=max_examples,
        record_use=record_use,
        tools=tools,
        lessons=lessons,
    )
    merged = inject(conversation, result.messages)
    try:
        validate_conversation(merged)
    except ConversationError as exc:  # pragma: no cover - guards the invariant, not user input
        raise TemplateError(
            f"Warm messages from {result.template.name!r} broke the conversation: {exc}",
            template=result.template.name,
        ) from exc
    return merged, result
