"""kindling.cron: scheduled template rebuilds, reviews and agent prompts, with guards.

Jobs live in ``$KINDLING_HOME/cron/jobs.json`` (or SQL); ``tick()`` runs the due ones once,
crash-safe; guards refuse small-context models and tell the job where it runs.
"""

from kindling.cron.delivery import SILENT_MARKER, deliver, is_silent
from kindling.cron.guards import (
    MIN_CONTEXT_TOKENS,
    ContextCheck,
    build_job_prompt,
    check_model_context,
    classify_runtime,
    detect_context_length,
    detect_provider_mismatch,
)
from kindling.cron.jobs import (
    Job,
    JobStore,
    JsonJobStore,
    Repeat,
    SqlJobStore,
    cron_dir,
    edited_job,
    make_job,
    open_job_store,
    output_root,
)
from kindling.cron.runners import RunOutcome
from kindling.cron.schedule import Schedule, first_run, next_run_after, parse_schedule
from kindling.cron.scheduler import (
    JobRun,
    TickResult,
    add_job,
    edit_job,
    run_daemon,
    run_job_now,
    scheduler_status,
    tick,
)

__all__ = [
    "MIN_CONTEXT_TOKENS",
    "SILENT_MARKER",
    "ContextCheck",
    "Job",
    "JobRun",
    "JobStore",
    "JsonJobStore",
    "Repeat",
    "RunOutcome",
    "Schedule",
    "SqlJobStore",
    "TickResult",
    "add_job",
    "build_job_prompt",
    "check_model_context",
    "classify_runtime",
    "cron_dir",
    "deliver",
    "detect_context_length",
    "detect_provider_mismatch",
    "edit_job",
    "edited_job",
    "first_run",
    "is_silent",
    "make_job",
    "next_run_after",
    "open_job_store",
    "output_root",
    "parse_schedule",
    "run_daemon",
    "run_job_now",
    "scheduler_status",
    "tick",
]
