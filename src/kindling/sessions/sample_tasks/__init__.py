"""The sample's tasks: each user request, and the calls that answer it.

Every request lists the calls it asks for and nothing else, so a call in a generated session is
always one its preceding request calls for (a question about a port looks at that port and stops
what holds it; it never runs ``df -h``), and what a call gives back fits the call. A session opens
with one task's opening request; the requests that follow in it are that task's follow-ups. One
module per scenario. Changing anything here changes the generated rows, so bump
``sample.SAMPLE_VERSION`` with it.
"""

from __future__ import annotations

from kindling.sessions.sample_data import Task
from kindling.sessions.sample_tasks import analysis, files, mixed, research, software, terminal

__all__ = ["SCENARIOS", "TASKS"]

# The scenarios the generator plays, the task type each is meant to be by the calls it makes (the
# rule: a tool family with more than 60% of the calls, else mixed), and how common each is.
# Software fixes are done with read_file/patch/search_files plus some terminal, so they come out
# ``file`` (or ``mixed`` when the terminal share grows); ``code`` is computation with execute_code.
SCENARIOS: tuple[tuple[str, str, int], ...] = (
    ("analysis", "code", 17),
    ("software", "file", 20),
    ("file", "file", 13),
    ("research", "research", 17),
    ("terminal", "terminal", 17),
    ("mixed", "mixed", 16),
)
TASKS: dict[str, tuple[Task, ...]] = {
    "analysis": analysis.TASKS,
    "software": software.TASKS,
    "file": files.TASKS,
    "research": research.TASKS,
    "terminal": terminal.TASKS,
    "mixed": mixed.TASKS,
}
