"""Which lessons a warm-up shows, and how they share its token budget with the examples.

A warm-up shows the lessons (``kindling.mining.lessons``) of the tools its examples show and of the
agent's other tools the task's evidence makes relevant (a short warm-up shows few tools, and the
task may well call others), ranked by how often the error happened (sessions) times how relevant
the tool is to the task (the plan's evidence for it; 1 when there is none). Lessons are the cheaper part of the warm-up: they take at
most a quarter of its tokens, and when the budget is small they are dropped before the examples
would be cut to fewer tools than the warm-up shows without them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from kindling.mining.model import Lesson
from kindling.warmup.build import lesson_line, lessons_message
from kindling.warmup.tokens import estimate_message_tokens

__all__ = [
    "LESSON_SHARE",
    "SHOWN_RELEVANCE",
    "UNKNOWN_RELEVANCE",
    "lessons_cost",
    "rank_lessons",
    "within_share",
]

#: The most of a warm-up's estimated tokens its lessons may take.
LESSON_SHARE = 0.25
#: A tool the examples show ranks its lessons at least at this relevance.
SHOWN_RELEVANCE = 0.5
#: The relevance of a tool the agent has that the task's evidence does not know (the template has
#: lessons for it but no example): its lessons come last, where the quarter leaves room.
UNKNOWN_RELEVANCE = 0.01


def rank_lessons(
    lessons: Sequence[Lesson],
    tools: Sequence[str],
    evidence: Mapping[str, float],
    agent_tools: Collection[str] | None = None,
) -> list[Lesson]:
    """Return the lessons of the tools the agent has (``agent_tools``; None: any), best first:
    sessions times the tool's relevance, then sessions, tool and error class.

    A tool's relevance is the task's ``evidence`` for it, at least ``SHOWN_RELEVANCE`` for the
    ``tools`` the examples show, ``UNKNOWN_RELEVANCE`` for one the evidence does not know, and 1
    for every tool when the plan has no evidence. What is shown is then cut to a quarter of the
    warm-up's tokens, so lessons of tools the task makes likely come first and the rest fill room
    that is left, as the general list of examples does where the task says little.
    """
    shown = set(tools)

    def weight(lesson: Lesson) -> float:
        if not evidence:
            return 1.0
        p = evidence.get(lesson.tool_name, UNKNOWN_RELEVANCE)
        return max(p, SHOWN_RELEVANCE) if lesson.tool_name in shown else p

    chosen = [
        lesson
        for lesson in lessons
        if lesson.tool_name in shown
        or (agent_tools is None and bool(evidence))
        or (agent_tools is not None and lesson.tool_name in agent_tools)
    ]
    return sorted(
        chosen,
        key=lambda lesson: (
            -lesson.sessions * weight(lesson),
            -lesson.sessions,
            lesson.tool_name,
            lesson.error_class,
        ),
    )


def lessons_cost(lines: Sequence[str]) -> int:
    """Return the estimated tokens the lessons block of ``lines`` adds to a warm-up (0 for none)."""
    return estimate_message_tokens(lessons_message(lines)) if lines else 0


def within_share(
    lessons: Sequence[Lesson], cap: int, fits: Callable[[list[str], int], bool] | None = None
) -> list[str]:
    """Return the lines of the first ``lessons`` whose block costs at most ``cap`` tokens, skipping any
    that would not fit; ``fits(lines, cost)``, when given, must also accept the block."""
    lines: list[str] = []
    for lesson in lessons:
        candidate = [*lines, lesson_line(lesson)]
        cost = lessons_cost(candidate)
        if cost > cap:
            continue
        if fits is not None and not fits(candidate, cost):
            continue
        lines = candidate
    return lines
