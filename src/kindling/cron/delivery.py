"""Where a job's output goes: always a Markdown file, then (unless silent or local) an Apprise URL."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from kindling.cron.jobs import Job, output_root, validate_name
from kindling.errors import ConfigError, EndpointError
from kindling.fileio import write_atomic

SILENT_MARKER = "[SILENT]"
LOCAL = "local"


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


def check_delivery_url(url: str) -> str:
    """Return ``url`` when it is ``local`` or an Apprise URL Apprise understands.

    Raises ConfigError otherwise, so a typo is caught when the job is added, not at 3 a.m.
    """
    if url == LOCAL:
        return url
    import apprise  # lazy: apprise loads every notification plugin on import

    if not apprise.Apprise().add(url):
        raise ConfigError(f"Delivery URL {redact(url)!r} is not 'local' or an Apprise URL kindling can use.")
    return url


def deliver(url: str, *, title: str, body: str, timeout: float = 15.0) -> None:
    """Send ``body`` to an Apprise URL.

    Raises ConfigError when Apprise does not understand the URL and EndpointError when sending fails.
    """
    import apprise  # lazy: apprise loads every notification plugin on import

    notifier = apprise.Apprise()
    if not notifier.add(url):
        raise ConfigError(f"Delivery URL {redact(url)!r} is not an Apprise URL kindling can use.")
    result = notifier.notify(body=body, title=title, timeout=timeout)
    if not result:
        raise EndpointError(f"Delivery to {redact(url)} failed.", base_url=redact(url))


def redact(url: str) -> str:
    """Return a delivery URL safe to log and save: Apprise's privacy form, or only the scheme.

    Tokens sit in different places per service (Telegram's bot token is the host, Pushover's app
    token follows the ``@``), so only Apprise, which parses each service, knows what to hide.
    """
    if url == LOCAL:
        return url
    import apprise  # lazy: apprise loads every notification plugin on import

    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin:
        # The query holds options, not secrets, but is long; the path is masked by Apprise.
        return str(plugin.url(privacy=True)).split("?", 1)[0]
    scheme, sep, _rest = url.partition("://")
    return f"{scheme}://..." if sep else "..."
