"""Which lessons a warm-up shows, and how they share its token budget with the examples.

A warm-up shows the lessons (``kindling.mining.lessons``) of the tools its examples show, ranked by
how often the error happened (sessions) times how relevant the tool is to the task (the plan's
evidence for it; 1 when there is none). Lessons are the cheaper part of the warm-up: they take at
most a quarter of its tokens, and when the budget is small they are dropped before the examples
would be cut to fewer tools than the warm-up shows without them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kindling.mining.model import Lesson
from kindling.warmup.build import lesson_line, lessons_message
from kindling.warmup.tokens import estimate_message_tokens

__all__ = ["LESSON_SHARE", "lessons_cost", "rank_lessons", "within_share"]

#: The most of a warm-up's estimated tokens its lessons may take.
LESSON_SHARE = 0.25
#: A tool the plan gives no evidence for still ranks its lessons at this weight (it is shown).
_FLOOR = 0.05


def rank_lessons(
    lessons: Sequence[Lesson], tools: Sequence[str], evidence: Mapping[str, float]
) -> list[Lesson]:
    """Return the lessons of ``tools``, best first: sessions times the tool's relevance (its
    ``evidence``, 1 when the plan has none), then sessions, tool and error class."""
    shown = set(tools)

    def weight(lesson: Lesson) -> float:
        return max(evidence.get(lesson.tool_name, 1.0 if not evidence else _FLOOR), _FLOOR)

    chosen = [lesson for lesson in lessons if lesson.tool_name in shown]
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
