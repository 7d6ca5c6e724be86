"""``kindling cron``: scheduled template rebuilds, reviews and agent prompts, with guards."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import datetime
from typing import Annotated, Any, Optional

import typer
from rich.text import Text

from kindling.cli.common import JsonOption, console, err_console, print_json, print_records

cron_app = typer.Typer(
    name="cron",
    help=(
        "Run jobs on a schedule: rebuild templates, review sessions, run agent prompts.\n\n"
        "Schedules: '30m'/'2h'/'1d' (once, after a delay), 'every 30m', a 5-field cron expression "
        "('0 9 * * *') or an ISO timestamp. Jobs live in $KINDLING_HOME/cron/jobs.json unless --db "
        "or KINDLING_CRON_DB names a SQLite file or a postgresql:// URL."
    ),
    no_args_is_help=True,
)

DbOption = Annotated[
    Optional[str],
    typer.Option(
        "--db",
        help="Job store: a .json file, a SQLite file or a sqlite:// or postgresql:// URL "
        "(default: the variable KINDLING_CRON_DB, else cron/jobs.json under KINDLING_HOME).",
    ),
]
RefArgument = Annotated[str, typer.Argument(help="The job's id or name.")]


def _store(db: str | None, *, create: bool = True) -> Any:
    from kindling.cron.jobs import open_job_store

    return open_job_store(db, create=create)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "-"


def _cell_when(value: datetime | None) -> str:
    """A time for a table cell (the header says UTC): short enough that 80 columns fit a row."""
    return value.strftime("%m-%d %H:%M") if value else "-"


def _state(job: Any) -> str:
    if not job.enabled:
        return "paused"
    return "done" if job.next_run_at is None else "scheduled"


def _last_status(job: Any) -> str:
    if job.last_status:
        return str(job.last_status)
    # Started (the claim stamps last_run_at) but no result recorded: running now, or killed.
    return "unfinished" if job.last_run_at else "-"


def _warn_unreadable(store: Any) -> None:
    for reason in store.skipped:
        err_console.print(f"Skipped unreadable job {reason}", markup=False, highlight=False)


ScheduleOption = Annotated[
    Optional[str],
    typer.Option("--schedule", help="When to run: '30m', 'every 2h', '0 9 * * 1-5', an ISO time."),
]
NameOption = Annotated[
    Optional[str], typer.Option("--name", "-n", help="A unique job name (letters, digits, . _ -).")
]
PromptOption = Annotated[Optional[str], typer.Option("--prompt", "-p", help="The prompt of a prompt job.")]
SkillOption = Annotated[
    Optional[list[str]], typer.Option("--skill", help="A skill to include in the prompt (repeatable).")
]
ModelOption = Annotated[
    Optional[str], typer.Option("--model", help="Model name, e.g. openai/gpt-4o or llama3.1.")
]
ProviderOption = Annotated[Optional[str], typer.Option("--provider", help="Provider, e.g. openai or ollama.")]
BaseUrlOption = Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint URL.")]
ApiKeyEnvOption = Annotated[
    Optional[str], typer.Option("--api-key-env", help="Name of the environment variable holding the API key.")
]
ContextLengthOption = Annotated[
    Optional[int],
    typer.Option(
        "--context-length", min=1, help="The model's context window; overrides the 64k minimum check."
    ),
]
DeliverOption = Annotated[
    Optional[str],
    typer.Option("--deliver", help="An Apprise URL to send output to, or 'local' to only save it."),
]
RepeatOption = Annotated[
    Optional[int], typer.Option("--repeat", min=1, help="Stop after this many runs (default: forever).")
]
TemplateOption = Annotated[
    Optional[str], typer.Option("--template", help="build-template: the template to rebuild.")
]
SourceOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--source", help="build-template/review: a session source (relative paths are stored absolute)."
    ),
]
TemplateStoreOption = Annotated[
    Optional[str],
    typer.Option("--template-store", help="build-template: the template store (default store)."),
]
SessionIdOption = Annotated[
    Optional[str], typer.Option("--session-id", help="review: the session to review (default: latest).")
]


def _print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        err_console.print(f"warning: {warning}", markup=False, highlight=False)


@cron_app.command("add")
def add_command(
    schedule: Annotated[
        str, typer.Argument(help="When to run: '30m', 'every 2h', '0 9 * * 1-5', an ISO time.")
    ],
    name: Annotated[str, typer.Option("--name", "-n", help="A unique job name (letters, digits, . _ -).")],
    kind: Annotated[
        str, typer.Option("--kind", "-k", help="What the job does: prompt, review or build-template.")
    ] = "prompt",
    prompt: PromptOption = None,
    skills: SkillOption = None,
    model: ModelOption = None,
    provider: ProviderOption = None,
    base_url: BaseUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    context_length: ContextLengthOption = None,
    deliver: DeliverOption = None,
    repeat: RepeatOption = None,
    template: TemplateOption = None,
    sources: SourceOption = None,
    template_store: TemplateStoreOption = None,
    session_id: SessionIdOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Add a scheduled job and print it.

    The job is checked as its runs will be: prompt and review jobs need a model and an endpoint
    (or KINDLING_CRON_MODEL and KINDLING_CRON_BASE_URL) and a context window of at least 64,000
    tokens, unless --context-length says otherwise. A job that could never run is refused.
    """
    from kindling.cron.jobs import make_job
    from kindling.cron.scheduler import add_job

    args: dict[str, Any] = {}
    if kind == "build-template":
        args = {"template": template or "", "sources": list(sources or []), "store": template_store or None}
    elif kind == "review":
        args = {"source": (sources or [""])[0] or None, "session_id": session_id or "latest"}
    job = make_job(
        name,
        kind,
        schedule,
        repeat=repeat,
        prompt=prompt or "",
        skills=list(skills or []),
        model=model or "",
        provider=provider or "",
        base_url=base_url or "",
        api_key_env=api_key_env or "",
        context_length=context_length,
        deliver=deliver or "local",
        args=args,
    )
    warnings = add_job(_store(db), job)
    _print_warnings(warnings)
    if json_output:
        print_json(job.to_dict())
        return
    console.print(
        f"Added job [bold]{job.name}[/] ({job.id}), {job.kind}, next run {_when(job.next_run_at)}.",
        highlight=False,
    )


@cron_app.command("edit")
def edit_command(
    ref: RefArgument,
    schedule: ScheduleOption = None,
    name: NameOption = None,
    prompt: PromptOption = None,
    skills: SkillOption = None,
    model: ModelOption = None,
    provider: ProviderOption = None,
    base_url: BaseUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    context_length: ContextLengthOption = None,
    deliver: DeliverOption = None,
    repeat: RepeatOption = None,
    template: TemplateOption = None,
    sources: SourceOption = None,
    template_store: TemplateStoreOption = None,
    session_id: SessionIdOption = None,
    db: DbOption = None,
    json_output: JsonOption = False,
) -> None:
    """Change a job: only the options given change; the job keeps its id and history.

    The changed job is checked like a new one. A new --schedule or --repeat gives it a new next run.

    Example: kindling cron edit nightly --context-length 32000
    """
    from kindling.cron.scheduler import edit_job

    given = {
        "schedule": schedule,
        "name": name,
        "prompt": prompt,
        "skills": skills,
        "model": model,
        "provider": provider,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "context_length": context_length,
        "deliver": deliver,
        "repeat": repeat,
    }
    changes: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    args: dict[str, Any] = {}
    if template is not None:
        args["template"] = template
    if template_store is not None:
        args["store"] = template_store
    if session_id is not None:
        args["session_id"] = session_id
    store = _store(db)
    if sources is not None:
        # build-template jobs read a list of sources, review jobs one.
        kind = store.get(ref).kind
        args.update({"sources": list(sources)} if kind == "build-template" else {"source": sources[0]})
    if args:
        changes["args"] = args
    if not changes:
        raise typer.BadParameter("Give at least one setting to change (see --help).")
    job, warnings = edit_job(store, ref, changes)
    _print_warnings(warnings)
    if json_output:
        print_json(job.to_dict())
        return
    console.print(
        f"Changed job {job.name} ({job.id}): {', '.join(sorted(changes))}; next run {_when(job.next_run_at)}.",
        markup=False,
        highlight=False,
    )


@cron_app.command("list")
def list_command(db: DbOption = None, json_output: JsonOption = False) -> None:
    """List jobs with their schedule, next run and last status.

    A table when it fits the terminal; on a narrower one, each job as a short block, so no value is
    ever cut.
    """
    store = _store(db, create=False)
    jobs = store.list()
    _warn_unreadable(store)
    if json_output:
        print_json([job.to_dict() for job in jobs])
        return
    if not jobs:
        console.print(f"No jobs in {store.location}.", markup=False, highlight=False)
        return
    headers = ["id", "name", "kind", "schedule", "next run", "last status"]
    rows: list[list[str]] = []
    errors: list[str] = []
    for job in jobs:
        status = _last_status(job)
        if job.last_run_at:
            status += f" {_cell_when(job.last_run_at)}"
        if job.last_error:
            # Errors quote whole endpoint replies: in a cell they wrapped into a dozen lines, so they go
            # under the jobs at full width, one line each.
            errors.append(f"{job.name}: {' '.join(job.last_error.split())[:300]}")
        state = _state(job)
        upcoming = _cell_when(job.next_run_at) if state == "scheduled" else state
        rows.append([job.id, job.name, job.kind, job.schedule, upcoming, status])
    print_records(headers, rows, heading=1, caption="times in UTC")
    for line in errors:
        console.print(Text(f"last error of {line}"), highlight=False)


@cron_app.command("remove")
def remove_command(ref: RefArgument, db: DbOption = None) -> None:
    """Delete a job (its saved output stays)."""
    job = _store(db).remove(ref)
    console.print(f"Removed job {job.name} ({job.id}).", highlight=False)


@cron_app.command("pause")
def pause_command(ref: RefArgument, db: DbOption = None) -> None:
    """Pause a job: ticks skip it until it is resumed."""
    job = _store(db).update(ref, {"enabled": False})
    console.print(f"Paused job {job.name} ({job.id}).", highlight=False)


@cron_app.command("resume")
def resume_command(ref: RefArgument, db: DbOption = None) -> None:
    """Resume a paused job; a recurring job whose next run has passed gets a new one."""
    from kindling.cron.scheduler import resume_changes

    store = _store(db)
    job = store.update(ref, resume_changes(store.get(ref)))
    console.print(f"Resumed job {job.name} ({job.id}), next run {_when(job.next_run_at)}.", highlight=False)


def _print_run(run: Any) -> None:
    line = f"{run.name} ({run.job_id}): {run.status}"
    if run.error:
        line += f": {run.error}"
    if run.silent:
        line += " [silent, not delivered]"
    elif run.delivered:
        line += " [delivered]"
    console.print(line, markup=False, highlight=False)
    for warning in run.warnings:
        err_console.print(f"  warning: {warning}", markup=False, highlight=False)
    if run.output:
        console.print(f"  output: {run.output}", markup=False, highlight=False)


@cron_app.command("run")
def run_command(ref: RefArgument, db: DbOption = None, json_output: JsonOption = False) -> None:
    """Run one job now, whatever its schedule (its next scheduled run is unchanged)."""
    from kindling.cron.scheduler import run_job_now

    run = run_job_now(_store(db), ref)
    if json_output:
        print_json(run.to_dict())
    else:
        _print_run(run)
    if run.status in ("error", "blocked"):
        raise typer.Exit(1)


@cron_app.command("tick")
def tick_command(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Run every due job once (what the daemon does every 60 s); safe to call from system cron."""
    from kindling.cron.scheduler import tick

    store = _store(db)
    result = tick(store)
    if json_output:
        print_json(result.to_dict())
        return
    _warn_unreadable(store)
    if result.locked:
        console.print("Another tick is running; nothing done.", highlight=False)
        return
    if not result.runs:
        console.print("No jobs due.", highlight=False)
    for run in result.runs:
        _print_run(run)


@cron_app.command("status")
def status_command(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Show the store, job counts, the next due job, the last run and failing jobs."""
    from kindling.cron.scheduler import scheduler_status

    status = scheduler_status(_store(db, create=False))
    if json_output:
        print_json(status)
        return
    console.print(f"store: {status['store']}", markup=False, highlight=False)
    console.print(
        f"jobs: {status['jobs']} ({status['enabled']} enabled, {status['paused']} paused, "
        f"{status['finished']} done, {status['due_now']} due now)",
        highlight=False,
    )
    nxt = status["next"]
    console.print(f"next: {nxt['name']} at {_when(nxt['at'])}" if nxt else "next: -", highlight=False)
    last = status["last_run"]
    console.print(
        f"last run: {last['name']} at {_when(last['at'])}, "
        f"{last['status'] or ('running' if status['tick_running'] else 'unfinished')}"
        if last
        else "last run: -",
        highlight=False,
    )
    console.print(f"tick running: {'yes' if status['tick_running'] else 'no'}", highlight=False)
    for failing in status["failing"]:
        console.print(f"failing: {failing['name']}: {failing['status']}: {failing['error']}", markup=False)
    for job in status["unfinished"]:
        console.print(
            f"unfinished: {job['name']} started at {_when(job['at'])} and never finished (killed or crashed)",
            markup=False,
            highlight=False,
        )
    for reason in status["unreadable"]:
        console.print(f"unreadable: {reason}", markup=False)


@cron_app.command("daemon")
def daemon_command(
    interval: Annotated[float, typer.Option("--interval", min=1.0, help="Seconds between ticks.")] = 60.0,
    max_ticks: Annotated[
        Optional[int], typer.Option("--max-ticks", min=1, help="Stop after this many ticks (default: never).")
    ] = None,
    db: DbOption = None,
) -> None:
    """Tick every 60 s (or --interval) until interrupted (Ctrl-C or SIGTERM)."""
    from kindling.cron.scheduler import run_daemon

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    store = _store(db)
    err_console.print(
        f"kindling cron daemon: ticking {store.location} every {interval:g}s", markup=False, highlight=False
    )

    def report(result: Any) -> None:
        for run in result.runs:
            _print_run(run)

    try:
        run_daemon(store, interval=interval, stop=stop, max_ticks=max_ticks, on_tick=report)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


@cron_app.command("path")
def path_command(db: DbOption = None, json_output: JsonOption = False) -> None:
    """Print where jobs and their output live."""
    import os

    from kindling.cron.jobs import cron_dir, default_jobs_path, output_root
    from kindling.db import redact_url

    # Where things are, without opening (and so creating) anything.
    target = db or os.environ.get("KINDLING_CRON_DB")
    jobs = redact_url(target) if target else str(default_jobs_path())
    paths = {"cron_dir": str(cron_dir()), "jobs": jobs, "output": str(output_root())}
    if json_output:
        print_json(paths)
        return
    for key, value in paths.items():
        console.print(f"{key}: {value}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``cron`` command group to the root app."""
    app.add_typer(cron_app, name="cron")
