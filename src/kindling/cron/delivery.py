"""Where a job's output goes: always a Markdown file, then (unless silent or local) an Apprise URL."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from kindling.cron.apprise_urls import LOCAL, check_delivery_url, deliver, redact
from kindling.cron.jobs import Job, output_root, validate_name
from kindling.fileio import write_atomic

__all__ = [
    "LOCAL",
    "SILENT_MARKER",
    "check_delivery_url",
    "deliver",
    "is_silent",
    "output_path",
    "redact",
    "render_output",
    "save_output",
]

SILENT_MARKER = "[SILENT]"


def is_silent(response: str) -> bool:
    """True when a response starts with ``[SILENT]``: save it, do not deliver it."""
    return response.lstrip().startswith(SILENT_MARKER)


def output_path(job: Job, when: datetime, *, root: Path | None = None) -> Path:
    """Return a fresh ``<root>/<job id>/<UTC timestamp>.md`` path (suffixed if that second is taken).

    Raises InvalidNameError when the job id is not safe as a directory name.
    """
    directory = (root or output_root()) / validate_name(job.id, "job id")
    stamp = when.strftime("%Y%m%dT%H%M%SZ")
    candidate = directory / f"{stamp}.md"
    counter = 2
    while candidate.exists():
        candidate = directory / f"{stamp}-{counter}.md"
        counter += 1
    return candidate


def render_output(job: Job, when: datetime, status: str, body: str, warnings: list[str]) -> str:
    """Return the Markdown saved for one run: a header (job, time, status, warnings), then the body."""
    lines = [
        f"# {job.name}",
        "",
        f"- job: `{job.id}` ({job.kind}, schedule `{job.schedule}`)",
        f"- ran at: {when.isoformat()}",
        f"- status: {status}",
    ]
    if job.model:
        lines.append(f"- model: {job.model}")
    lines.extend(f"- warning: {w}" for w in warnings)
    lines += ["", body.rstrip(), ""]
    return "\n".join(lines)


def save_output(job: Job, when: datetime, text: str, *, root: Path | None = None) -> Path:
    """Write ``text`` atomically to the job's output directory and return the path.

    Raises StoreError when it cannot be written.
    """
    path = output_path(job, when, root=root)
    write_atomic(path, text)
    return path
