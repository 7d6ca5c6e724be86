"""What each job kind does when it runs. Every runner returns a RunOutcome and never raises.

The heavy capabilities (agent loop, review, template building) are imported inside the runners,
so listing or adding jobs never loads them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kindling.config import env_str, hermes_state_db
from kindling.cron.guards import (
    build_job_prompt,
    check_model_context,
    detect_provider_mismatch,
    load_skills,
    runtime_provider,
)
from kindling.cron.jobs import Job, JobStatus, validate_name
from kindling.db import redact_url
from kindling.errors import ConfigError, KindlingError, ModelContextError


@dataclass
class RunOutcome:
    """The result of one run: its status, the text to save and deliver, an error and warnings."""

    status: JobStatus
    response: str = ""
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


def job_api_key(job: Job) -> str:
    """Return the API key for a job: ``$<job.api_key_env>`` when set, else ``$KINDLING_CRON_API_KEY``.

    Keys are never stored in the job itself, only the name of the variable holding one.
    """
    if job.api_key_env:
        value = os.environ.get(job.api_key_env)
        if value:
            return value
    return env_str("KINDLING_CRON_API_KEY", "")


def _endpoint(job: Job) -> tuple[str, str]:
    model = job.model or env_str("KINDLING_CRON_MODEL", "")
    base_url = job.base_url or env_str("KINDLING_CRON_BASE_URL", "")
    if not model or not base_url:
        raise ConfigError(
            f"Job {job.name!r} needs a model and a base URL (set them on the job, or "
            "KINDLING_CRON_MODEL and KINDLING_CRON_BASE_URL)."
        )
    return model, base_url


def _runtime(job: Job, model: str, base_url: str) -> Any:
    from kindling.agent.loop import Runtime

    return Runtime(
        model=model,
        base_url=base_url,
        api_key=job_api_key(job),
        timeout=float(job.args.get("timeout", 60.0)),
        max_retries=int(job.args.get("max_retries", 3)),
    )


def check_job(job: Job) -> list[str]:
    """Check that ``job`` can ever run, with the same guards and messages its runs apply.

    Prompt and review jobs need a model and a base URL (on the job, or KINDLING_CRON_MODEL and
    KINDLING_CRON_BASE_URL) and a context window of at least MIN_CONTEXT_TOKENS, unless the job sets
    its context length. Returns warnings (a window that cannot be found out). Raises ConfigError for
    a missing endpoint and ModelContextError for a model under the minimum.
    """
    if job.kind not in ("prompt", "review"):
        return []
    model, base_url = _endpoint(job)
    check = check_model_context(
        model, base_url=base_url, api_key=job_api_key(job), config_context_length=job.context_length
    )
    return [check.note] if check.source == "unknown" and check.note else []


def run_prompt_job(job: Job) -> RunOutcome:
    """Run a prompt job through the agent loop after the context and provider guards.

    A model under the context minimum gives ``blocked`` and the endpoint is never called.
    """
    warnings: list[str] = []
    try:
        model, base_url = _endpoint(job)
        check = check_model_context(
            model, base_url=base_url, api_key=job_api_key(job), config_context_length=job.context_length
        )
    except ModelContextError as exc:
        return RunOutcome("blocked", error=str(exc), warnings=warnings)
    except KindlingError as exc:
        return RunOutcome("error", error=str(exc), warnings=warnings)
    if check.note and check.source == "unknown":
        warnings.append(check.note)
    # Without --provider, a bare model on a hosted endpoint would otherwise be told it runs locally.
    active = runtime_provider(job.provider, model, base_url)
    mismatch = detect_provider_mismatch(job.prompt, active)
    if mismatch:
        warnings.append(f"The prompt names {mismatch}, but this job runs on {active}.")
    try:
        skills, missing = load_skills(job.skills)
    except KindlingError as exc:
        return RunOutcome("error", error=str(exc), warnings=warnings)
    warnings.extend(f"Skill {name!r} was not found; running without it." for name in missing)
    prompt = build_job_prompt(job, runtime_model=model, runtime_provider=active, skills=skills)

    from kindling.agent.loop import run

    result = run(
        [{"role": "user", "content": prompt}],
        runtime=_runtime(job, model, base_url),
        tools=None,
        max_iterations=int(job.args.get("max_iterations", 10)),
    )
    if result.error:
        return RunOutcome("error", response=result.final_text or "", error=result.error, warnings=warnings)
    return RunOutcome("ok", response=result.final_text or "", warnings=warnings)


def run_review_job(job: Job) -> RunOutcome:
    """Review one session (``args.session_id``, or ``latest``) from ``args.source`` (default: Hermes).

    The same context minimum as prompt jobs applies: a model under it gives ``blocked``.
    """
    try:
        model, base_url = _endpoint(job)
        check_model_context(
            model, base_url=base_url, api_key=job_api_key(job), config_context_length=job.context_length
        )
    except ModelContextError as exc:
        return RunOutcome("blocked", error=str(exc))
    except KindlingError as exc:
        return RunOutcome("error", error=str(exc))
    try:
        source = str(job.args.get("source") or hermes_state_db())
        from kindling.review import review_session
        from kindling.sessions import resolve_session_id

        session_id = resolve_session_id(source, str(job.args.get("session_id") or "latest"))

        outcome = review_session(
            source,
            session_id,
            runtime=_runtime(job, model, base_url),
            review_memory=bool(job.args.get("memory", True)),
            review_skills=bool(job.args.get("skills", True)),
        )
    except KindlingError as exc:
        return RunOutcome("error", error=str(exc))
    lines = [f"Reviewed session {session_id}.", "", outcome.summary or "(no summary)"]
    lines += [f"- {action}" for action in outcome.actions]
    text = "\n".join(lines)
    if outcome.error:
        return RunOutcome("error", response=text, error=outcome.error)
    return RunOutcome("ok", response=text)


def run_build_template_job(job: Job) -> RunOutcome:
    """Rebuild template ``args.template`` from ``args.sources`` into ``args.store`` (default store)."""
    args = job.args
    try:
        name = validate_name(str(args.get("template") or ""), "template name")
        sources = [str(s) for s in args.get("sources") or [str(hermes_state_db())]]
        from kindling.templates import open_store
        from kindling.templates.build import build_template_with_report

        store = open_store(args.get("store") or None)
        # Unset settings are None, so a rebuild keeps the template's own description, type and tags.
        result = build_template_with_report(
            name,
            sources,
            store=store,
            description=args.get("description") or None,
            task_type=args.get("task_type") or None,
            tags=tuple(args["tags"]) if args.get("tags") else None,
            **dict(args.get("filters") or {}),
        )
    except KindlingError as exc:
        return RunOutcome("error", error=str(exc))
    template = result.template
    label = f"{template.name} v{template.version}"
    # Sources may be database URLs with passwords, and this text is saved and delivered.
    where = ", ".join(redact_url(s) for s in sources)
    if result.unchanged:
        return RunOutcome("ok", response=f"Template {label} is unchanged: nothing new in {where}.")
    return RunOutcome(
        "ok", response=f"Built template {label} with {len(template.examples)} examples from {where}."
    )


RUNNERS: dict[str, Callable[[Job], RunOutcome]] = {
    "prompt": run_prompt_job,
    "review": run_review_job,
    "build-template": run_build_template_job,
}
