"""``kindling review``, ``kindling memory ...`` and ``kindling skills ...``.

A thin client of :mod:`kindling.review`: parse options, call the library, print.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from kindling.cli.common import JsonOption, console, err_console, print_json, show_progress

memory_app = typer.Typer(
    help="Show the durable memories Hermes Agent and kindling share (MEMORY.md, USER.md).",
    no_args_is_help=True,
)
skills_app = typer.Typer(
    help="Show the skills Hermes Agent and kindling share ($HERMES_HOME/skills/**/SKILL.md).",
    no_args_is_help=True,
)


def review_command(
    source: Annotated[
        str,
        typer.Argument(
            help="Where the session lives: a Hermes state.db, a postgresql:// URL or a session file."
        ),
    ],
    session: Annotated[
        str,
        typer.Option(
            "--session", "-s", help="The id of the session to review; 'latest' is the one that started last."
        ),
    ],
    base_url: Annotated[
        str,
        typer.Option(
            "--base-url",
            envvar="KINDLING_REVIEW_BASE_URL",
            show_envvar=False,
            help="The OpenAI-compatible endpoint's URL (see the example below).",
        ),
    ],
    model: Annotated[
        str,
        typer.Option("--model", "-m", envvar="KINDLING_REVIEW_MODEL", show_envvar=False, help="Model name."),
    ],
    api_key: Annotated[
        str,
        typer.Option(
            "--api-key",
            envvar="KINDLING_REVIEW_API_KEY",
            show_envvar=False,
            help="API key (none for local servers).",
        ),
    ] = "",
    memory: Annotated[bool, typer.Option("--memory", help="Review for memories (default: both).")] = False,
    skills: Annotated[bool, typer.Option("--skills", help="Review for skills (default: both).")] = False,
    format: Annotated[
        str | None, typer.Option("--format", "-f", help="Force the source format instead of detecting it.")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="Seconds per request.")] = 60.0,
    max_retries: Annotated[int, typer.Option("--max-retries", min=0, help="Retries on 429/5xx.")] = 3,
    max_iterations: Annotated[
        int, typer.Option("--max-iterations", min=1, help="Hard cap on model requests in the review.")
    ] = 16,
    json_output: JsonOption = False,
) -> None:
    """Review a stored session and keep what is worth keeping as memories and skills.

    The review may call only the memory and skill tools; anything else is denied, never run.
    Without --memory or --skills it reviews both, then prints what changed, e.g.
    "Self-improvement review: User profile updated · Skill 'x' created".

    --base-url, --model and --api-key default to the environment variables KINDLING_REVIEW_BASE_URL,
    KINDLING_REVIEW_MODEL and KINDLING_REVIEW_API_KEY.

    Example: kindling review ~/.hermes/state.db --session ID --base-url http://127.0.0.1:8000/v1 --model qwen3
    """
    from kindling.agent.loop import Runtime
    from kindling.errors import ReviewError
    from kindling.review.session import review_session

    review_memory, review_skills = (memory, skills) if memory or skills else (True, True)
    runtime = Runtime(
        model=model, base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
    )
    waiting = (
        err_console.status(
            f"Reviewing session {session}: waiting for {model} at {base_url} (at most {max_iterations} requests)"
        )
        if show_progress(json_output)
        else contextlib.nullcontext()
    )
    with waiting:
        outcome = review_session(
            source,
            session,
            runtime=runtime,
            review_memory=review_memory,
            review_skills=review_skills,
            format=format,
            max_iterations=max_iterations,
        )
    if json_output:
        print_json(outcome.as_dict())
        if outcome.error:
            raise typer.Exit(1)
        return
    if outcome.error:
        raise ReviewError(outcome.summary)
    console.print(outcome.summary, markup=False, highlight=False)
    for name in outcome.denied:
        console.print(f"Denied (not executed): {name}", markup=False, highlight=False)


TargetOption = Annotated[
    str, typer.Option("--target", "-t", help="memory (MEMORY.md), user (USER.md) or all.")
]


@memory_app.command("show")
def memory_show(target: TargetOption = "all", json_output: JsonOption = False) -> None:
    """Print the memory entries, with how much of each file's limit they use."""
    from kindling.errors import ConfigError
    from kindling.review.memory import TARGET_FILES, MemoryStore

    if target not in (*TARGET_FILES, "all"):
        raise ConfigError(f"--target {target!r} is not one of: memory, user, all.")
    store = MemoryStore()
    targets = list(TARGET_FILES) if target == "all" else [target]
    data = {
        name: {"path": str(store.path(name)), "usage": store.usage(name), "entries": store.entries(name)}
        for name in targets
    }
    if json_output:
        print_json(data)
        return
    for name, info in data.items():
        # The heading is its own line: as a table title it wrapped to the width of the table.
        console.print(f"{TARGET_FILES[name]} — {info['usage']}", markup=False, highlight=False)
        if not info["entries"]:
            console.print("  (no entries)", markup=False, highlight=False)
            continue
        table = Table(show_lines=True)
        table.add_column("#", justify="right")
        table.add_column("entry", overflow="fold")
        for index, entry in enumerate(info["entries"], 1):
            table.add_row(str(index), entry)
        console.print(table)


@memory_app.command("path")
def memory_path(json_output: JsonOption = False) -> None:
    """Print where the memory files and the provenance log live."""
    from kindling.review.memory import MemoryStore

    store = MemoryStore()
    paths = {
        "directory": store.directory,
        "memory": store.path("memory"),
        "user": store.path("user"),
        "provenance": store.provenance_path,
    }
    if json_output:
        print_json({k: str(v) for k, v in paths.items()})
        return
    typer.echo(str(store.directory))  # one line, never wrapped: scripts use it


@skills_app.command("list")
def skills_list(json_output: JsonOption = False) -> None:
    """List every skill with its category, version and description; unreadable ones are reported."""
    from kindling.cli.common import err_console
    from kindling.review.skills import SkillStore

    skills, broken = SkillStore().list()
    if json_output:
        print_json(
            {
                "skills": [s.as_dict() for s in skills],
                "unreadable": [{"path": str(p), "error": why} for p, why in broken],
            }
        )
        return
    table = Table()
    for column in ("name", "category", "version", "description"):
        table.add_column(column, overflow="fold")
    for skill in skills:
        table.add_row(skill.name, skill.category or "", skill.version or "", skill.description)
    console.print(table)
    for _path, why in broken:
        err_console.print(f"Unreadable: {why}", markup=False, highlight=False)
    console.print(f"{len(skills)} skill(s)", markup=False, highlight=False)


@skills_app.command("show")
def skills_show(
    name: Annotated[str, typer.Argument(help="The skill name.")], json_output: JsonOption = False
) -> None:
    """Print one skill's SKILL.md."""
    from kindling.review.skills import SkillStore

    skill = SkillStore().read(name)
    if json_output:
        print_json(skill.as_dict(with_content=True))
        return
    console.print(
        skill.content, markup=False, highlight=False, end="" if skill.content.endswith("\n") else "\n"
    )


@skills_app.command("path")
def skills_path(json_output: JsonOption = False) -> None:
    """Print the skills directory."""
    from kindling.review.skills import skills_dir

    directory: Path = skills_dir()
    if json_output:
        print_json({"directory": str(directory)})
        return
    typer.echo(str(directory))  # one line, never wrapped: scripts use it


def register(app: typer.Typer) -> None:
    """Add ``review`` and the ``memory`` and ``skills`` groups to the root app."""
    app.command("review")(review_command)
    app.add_typer(memory_app, name="memory")
    app.add_typer(skills_app, name="skills")
