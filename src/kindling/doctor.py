"""``kindling doctor``: check a set-up and say what is wrong and how to fix it.

Each check returns a ``Check``: ``ok``, ``warn`` (works, but worth a look), ``fail`` (broken: the
doctor exits non-zero) or ``skip`` (not in use here), with one sentence of detail and, when it is not
``ok``, a one-line fix. Nothing is created or changed: a store is opened for reading without
migrating it, a daemon is asked only what changes nothing.

What is checked: ``$KINDLING_HOME`` is a writable directory; the confirmation store opens at the
current schema; the daemon answers and each configured token has the role its user needs; the Hermes
plugin is installed and enabled; a running proxy answers, and its upstream and recording store answer
it (or the upstream named answers this machine); templates exist for warm-up and for the tools the
recent Hermes sessions and the proxy's recent conversations use; the clock is sane (and agrees with
the daemon's).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from email.utils import parsedate_to_datetime
from itertools import islice
from typing import Any, Literal

import httpx

from kindling.config import hermes_state_db, kindling_home
from kindling.errors import KindlingError

Status = Literal["ok", "warn", "fail", "skip"]

# A clock before this is certainly wrong (kindling did not exist); one this far off the daemon's or
# the database's makes request timeouts and audit times lie.
EARLIEST_SANE = 1_704_067_200.0  # 2024-01-01
LATEST_SANE = 4_102_444_800.0  # 2100-01-01
MAX_SKEW_SECONDS = 30.0
# How many of the newest Hermes sessions say which tools are in use.
RECENT_SESSIONS = 200


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, how it went, why, and the one line that fixes it."""

    name: str
    status: Status
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class DoctorOptions:
    """Where to look: the confirm database, the daemon and its tokens, the proxy's upstream."""

    confirm_db: str | None = None
    confirm_url: str | None = None
    agent_token: str | None = None
    approver_token: str | None = None
    upstream: str | None = None
    proxy_url: str | None = None
    timeout: float = 3.0

    @classmethod
    def from_env(cls, **overrides: Any) -> DoctorOptions:
        """Fill unset options from ``KINDLING_CONFIRM_URL``, ``KINDLING_CONFIRM_TOKEN``,
        ``KINDLING_CONFIRM_APPROVER_TOKEN`` and ``KINDLING_PROXY_URL``."""
        values: dict[str, Any] = {
            "confirm_url": os.environ.get("KINDLING_CONFIRM_URL") or None,
            "agent_token": os.environ.get("KINDLING_CONFIRM_TOKEN") or None,
            "approver_token": os.environ.get("KINDLING_CONFIRM_APPROVER_TOKEN") or None,
            "proxy_url": os.environ.get("KINDLING_PROXY_URL") or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def diagnose(options: DoctorOptions | None = None, *, now: Callable[[], float] = time.time) -> list[Check]:
    """Run every check; return the findings in order. Never raises for what it finds."""
    options = options or DoctorOptions.from_env()
    checks: list[Check] = [check_home(), check_clock(now())]
    checks.extend(check_confirm_store(options.confirm_db))
    checks.extend(check_daemon(options, now))
    plugin, warm_in_use = check_hermes_plugin()
    checks.append(plugin)
    checks.extend(check_templates(warm_in_use))
    proxy, upstream_seen = check_proxy(options)
    checks.extend(proxy)
    if options.upstream or upstream_seen is None:
        checks.append(check_upstream(options.upstream, options.timeout))
    else:
        checks.append(upstream_seen)
    return checks


def healthy(checks: list[Check]) -> bool:
    """True when no check failed."""
    return all(check.status != "fail" for check in checks)


def as_json(checks: list[Check]) -> dict[str, Any]:
    """Return the findings as ``{"ok": bool, "checks": [...]}``."""
    return {"ok": healthy(checks), "checks": [asdict(check) for check in checks]}


# -- the checks ----------------------------------------------------------------------------------
def check_home() -> Check:
    """``$KINDLING_HOME`` is a directory kindling can write in (or can be made)."""
    home = kindling_home()
    fix = f"Make {home} a writable directory, or point KINDLING_HOME at one."
    if home.exists() and not home.is_dir():
        return Check("home", "fail", f"KINDLING_HOME ({home}) is not a directory.", fix)
    if not home.exists():
        parent = next((p for p in home.parents if p.exists()), None)
        if parent is None or not os.access(parent, os.W_OK):
            return Check("home", "fail", f"KINDLING_HOME ({home}) does not exist and cannot be created.", fix)
        return Check("home", "ok", f"KINDLING_HOME ({home}) will be created on first use.")
    try:
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("home", "fail", f"Cannot write in KINDLING_HOME ({home}): {exc.strerror or exc}.", fix)
    return Check("home", "ok", f"KINDLING_HOME ({home}) is writable.")


def check_clock(now: float) -> Check:
    """The local clock is plausible (approvals expire by it, the audit log is stamped with it)."""
    if not EARLIEST_SANE <= now <= LATEST_SANE:
        shown = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now)) if 0 <= now < 1e11 else str(now)
        return Check(
            "clock",
            "fail",
            f"The clock says {shown} UTC, which cannot be right.",
            "Set the system clock (timedatectl set-ntp true).",
        )
    return Check("clock", "ok", "The clock is plausible.")


def check_confirm_store(db: str | None) -> list[Check]:
    """The confirmation database opens and is at the schema this kindling expects (not migrated here)."""
    import sqlalchemy as sa

    from kindling.confirm import tables
    from kindling.confirm.settings import ConfirmSettings
    from kindling.confirm.store import COMPONENT
    from kindling.db import create_engine, missing_sqlite_file, redact_url, schema_problems

    try:
        target = ConfirmSettings.from_env(db=db).database
    except KindlingError as exc:
        return [Check("confirm store", "fail", str(exc), "Fix the KINDLING_CONFIRM_* variable it names.")]
    shown = redact_url(target)
    if missing_sqlite_file(target) is not None:
        return [
            Check(
                "confirm store",
                "skip",
                f"No confirm database at {shown} yet (kindling confirm serve makes it).",
            )
        ]
    try:
        engine = create_engine(target)
        try:
            with engine.connect() as conn:
                problems = schema_problems(conn, COMPONENT, tables.MIGRATIONS)
                if not problems:
                    conn.execute(sa.select(tables.requests.c.id).limit(1)).first()
        finally:
            engine.dispose()
    except (KindlingError, sa.exc.SQLAlchemyError) as exc:
        detail = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return [
            Check(
                "confirm store",
                "fail",
                f"Cannot read the confirm database at {shown}: {detail}",
                "Check KINDLING_CONFIRM_DB (or --db) names the daemon's database and that it is readable.",
            )
        ]
    if problems:
        newer = any("newer kindling" in p for p in problems)
        fix = (
            "Upgrade kindling here to the release that wrote it (pip install -U kindling-agent)."
            if newer
            else "Start the daemon once (kindling confirm serve) to apply the migrations."
        )
        return [Check("confirm store", "fail", " ".join(problems), fix)]
    return [Check("confirm store", "ok", f"The confirm database at {shown} is at the current schema.")]


def check_daemon(options: DoctorOptions, now: Callable[[], float]) -> list[Check]:
    """The daemon answers, its clock agrees, and each configured token has its user's role."""
    in_use = options.confirm_url or options.agent_token or options.approver_token or _approvals_on()
    url = (options.confirm_url or "http://127.0.0.1:6000").rstrip("/")
    if not in_use:
        return [Check("confirm daemon", "skip", "No daemon is configured (KINDLING_CONFIRM_URL, _TOKEN).")]
    checks: list[Check] = []
    try:
        with httpx.Client(base_url=url, timeout=options.timeout) as http:
            before = now()
            health = http.get("/health")
            after = now()
            if health.status_code != 200:
                return [
                    Check(
                        "confirm daemon",
                        "fail",
                        f"The daemon at {url} answered /health with {health.status_code}.",
                        "Read the daemon's log (journalctl -u kindling-confirm) and its /ready.",
                    )
                ]
            checks.append(Check("confirm daemon", "ok", f"The daemon at {url} answers."))
            ready = http.get("/ready")
            if ready.status_code == 503:
                problems = ready.json().get("problems", []) if _is_json(ready) else []
                checks.append(
                    Check(
                        "confirm daemon ready",
                        "fail",
                        " ".join(problems) or "The daemon is not ready.",
                        "Read the daemon's log (journalctl -u kindling-confirm); check its database.",
                    )
                )
            checks.append(_skew("confirm daemon clock", health.headers.get("date"), (before + after) / 2))
            for label, token, wanted in (
                ("agent token (KINDLING_CONFIRM_TOKEN)", options.agent_token, "agent"),
                ("approver token (KINDLING_CONFIRM_APPROVER_TOKEN)", options.approver_token, "approver"),
            ):
                if token:
                    checks.append(_token_role(http, label, token, wanted))
    except httpx.HTTPError as exc:
        return [
            Check(
                "confirm daemon",
                "fail",
                f"The daemon at {url} does not answer: {type(exc).__name__}.",
                "Start it (kindling confirm serve, or systemctl start kindling-confirm) or fix KINDLING_CONFIRM_URL.",
            )
        ]
    return checks


def _is_json(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("application/json")


def _token_role(http: httpx.Client, label: str, token: str, wanted: str) -> Check:
    # Each probe is a read that changes nothing: admins list tokens, approvers read the audit log,
    # every role lists (its own) requests.
    headers = {"Authorization": f"Bearer {token}"}
    listed = http.get("/confirm", params={"limit": 1}, headers=headers)
    if listed.status_code == 401:
        return Check(
            label, "fail", "The daemon does not know this token (unknown or revoked).", _new_token(wanted)
        )
    if http.get("/tokens", headers=headers).status_code == 200:
        role = "admin"
    elif http.get("/audit", params={"limit": 1}, headers=headers).status_code == 200:
        role = "approver"
    else:
        role = "agent"
    if role == wanted or (wanted == "approver" and role == "admin"):
        return Check(label, "ok", f"An {role} token, as its user needs.")
    if wanted == "agent":
        return Check(
            label,
            "fail",
            f"An {role} token where the agent's belongs: an agent holding it could decide requests.",
            _new_token("agent"),
        )
    return Check(
        label, "fail", "An agent token where an approver's belongs: it cannot decide.", _new_token(wanted)
    )


def _new_token(role: str) -> str:
    return f"Create one with kindling confirm token create --role {role} --name NAME and set it."


def _skew(name: str, date_header: str | None, local: float) -> Check:
    if not date_header:
        return Check(name, "skip", "The daemon sent no Date header to compare clocks with.")
    try:
        remote = parsedate_to_datetime(date_header).timestamp()
    except (TypeError, ValueError):
        return Check(name, "skip", f"The daemon's Date header ({date_header!r}) is not a date.")
    skew = remote - local
    if abs(skew) > MAX_SKEW_SECONDS:
        return Check(
            name,
            "fail",
            f"This machine's clock and the daemon's differ by {skew:+.0f} s: timeouts and audit times disagree.",
            "Run NTP on both machines (timedatectl set-ntp true).",
        )
    return Check(name, "ok", f"The daemon's clock agrees with this one ({skew:+.0f} s).")


def _approvals_on() -> bool:
    try:
        from kindling.hermes_config import plugin_state
        from kindling.integrations.hermes import load_settings

        return plugin_state().active and load_settings().approvals
    except KindlingError:
        return False


def check_hermes_plugin() -> tuple[Check, bool]:
    """The kindling plugin is installed where Hermes runs and enabled in its config.yaml.

    Returns the finding and whether warm-up through the plugin is in use.
    """
    from kindling.hermes_config import config_path

    path = config_path()
    if not path.is_file():
        return Check("hermes plugin", "skip", f"No Hermes set-up here ({path} does not exist)."), False
    try:
        from kindling.integrations.hermes import status

        data = status(check_daemon=False)
    except KindlingError as exc:
        return Check("hermes plugin", "fail", str(exc), f"Fix {path}."), False
    warm = bool(data["active"] and data["parts"]["warm"])
    if not data["entry_point"]:
        fix = "pip install kindling-agent into the Python Hermes runs with."
        return Check(
            "hermes plugin", "fail", "kindling is not installed where Hermes can load it.", fix
        ), warm
    if data["disabled"]:
        fix = f"Remove kindling from plugins.disabled in {path}."
        return Check("hermes plugin", "fail", "The plugin is listed in plugins.disabled.", fix), False
    if not data["enabled"]:
        return (
            Check(
                "hermes plugin",
                "fail",
                f"The plugin is not enabled in {path}.",
                "Run kindling hermes install.",
            ),
            False,
        )
    return Check("hermes plugin", "ok", f"Installed and enabled in {path}."), warm


def check_templates(warm_in_use: bool) -> list[Check]:
    """Templates exist for warm-up, and cover the tools the newest Hermes sessions and the newest
    conversations the proxy recorded use."""
    from kindling.templates.store import open_store

    try:
        store = open_store()
        templates = store.list()
    except KindlingError as exc:
        return [Check("templates", "fail", str(exc), "Fix or move the file it names, then rebuild.")]
    build = f"kindling build main {hermes_state_db()}"
    usable = [t for t in templates if t.examples]
    if not usable:
        status: Status = "fail" if warm_in_use else "skip"
        detail = f"No template with examples in {store.location}" + (
            ": warm-up has nothing to show." if warm_in_use else " (warm-up is not in use)."
        )
        return [Check("templates", status, detail, f"Build one: {build}")]
    checks = [Check("templates", "ok", f"{len(usable)} template(s) with examples in {store.location}.")]
    covered = {e.tool_name for t in usable for e in t.examples}
    proxy_db = _proxy_db()
    for name, used, whose, fix in (
        (
            "tools without examples",
            _recent_tools(hermes_state_db()),
            "Recent Hermes sessions",
            f"Rebuild the template from recent sessions: {build}",
        ),
        (
            "proxy tools without examples",
            _recent_tools(proxy_db) if proxy_db is not None else None,
            "Conversations the proxy recorded lately",
            "Rebuild the default tenant's template from them (the proxy does every --build-every "
            f"conversations): kindling build proxy-default {proxy_db} --tenant default",
        ),
    ):
        if used is None:
            continue
        missing = sorted(set(used) - covered)
        if missing:
            shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
            checks.append(
                Check(
                    name,
                    "warn",
                    f"{whose} use tools no template has an example of: {shown}.",
                    fix,
                )
            )
        else:
            phrase = whose[0].lower() + whose[1:]
            checks.append(Check(name, "ok", f"Every tool {phrase} use ({len(used)}) has examples."))
    return checks


def _proxy_db() -> str | None:
    """The proxy's recordings when they are a SQLite file here (a database server is not read)."""
    from kindling.proxy.settings import default_db

    target = default_db()
    return target if "://" not in target and os.path.isfile(target) else None


def _recent_tools(source: Any) -> list[str] | None:
    """The tools called in the newest sessions of ``source`` (None when there is no such file)."""
    if not os.path.isfile(source):
        return None
    from kindling.sessions.sources import iter_sessions

    tools: dict[str, None] = {}
    with contextlib.suppress(KindlingError):
        for session in islice(iter_sessions(source), RECENT_SESSIONS):
            for message in session.messages:
                for call in message.tool_calls:
                    tools[call.name] = None
    return list(tools)


def check_proxy(options: DoctorOptions) -> tuple[list[Check], Check | None]:
    """A configured proxy answers, and its recording store and upstream answer it.

    Configured: ``options.proxy_url`` (``KINDLING_PROXY_URL``), or a proxy has recorded in this
    ``$KINDLING_HOME`` (then the default address is asked, and silence is only a warning: it may
    not be running on purpose). Returns the findings and, when the proxy said, what it found of
    its upstream (the ``proxy upstream`` check, asked from where the proxy runs).
    """
    from kindling.proxy.settings import DEFAULT_HOST, DEFAULT_PORT

    url = (options.proxy_url or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}").rstrip("/").removesuffix("/v1")
    if options.proxy_url is None and _proxy_db() is None:
        return [Check("proxy", "skip", "No proxy is configured (KINDLING_PROXY_URL, --proxy-url).")], None
    start = "Start it (kindling proxy --upstream URL, or systemctl start kindling-proxy) or fix KINDLING_PROXY_URL."
    try:
        with httpx.Client(base_url=url, timeout=options.timeout) as http:
            health = http.get("/health")
            if health.status_code != 200 or not _is_json(health) or health.json().get("service") != "proxy":
                return [
                    Check(
                        "proxy",
                        "fail",
                        f"What answers at {url} is not a kindling proxy (/health: {health.status_code}).",
                        "Point KINDLING_PROXY_URL (or --proxy-url) at the proxy.",
                    )
                ], None
            ready = http.get("/ready")
            upstream = _proxy_upstream(http)
    except httpx.HTTPError as exc:
        status: Status = "fail" if options.proxy_url else "warn"
        return [
            Check("proxy", status, f"The proxy at {url} does not answer: {type(exc).__name__}.", start)
        ], None
    forwards = f"; it forwards to {upstream}" if upstream else ""
    checks = [Check("proxy", "ok", f"The proxy at {url} answers{forwards}.")]
    problems = [str(p) for p in ready.json().get("problems", [])] if ready.status_code == 503 else []
    if ready.status_code not in (200, 503) or (ready.status_code == 503 and not problems):
        problems = [f"The proxy's /ready answered {ready.status_code}."]
    upstream_problems = [p for p in problems if "upstream" in p]
    store_problems = [p for p in problems if p not in upstream_problems]
    if store_problems:
        newer = any("newer kindling" in p for p in store_problems)
        fix = (
            "Upgrade kindling where the proxy runs to the release that wrote its store (pip install -U kindling-agent)."
            if newer
            else "Check the proxy's --db (KINDLING_PROXY_DB) names a database it can reach, then read its log."
        )
        checks.append(Check("proxy store", "fail", " ".join(store_problems), fix))
    else:
        checks.append(
            Check("proxy store", "ok", "The proxy's recording store answers at the current schema.")
        )
    if upstream_problems:
        seen = Check(
            "proxy upstream",
            "fail",
            " ".join(upstream_problems),
            "Start the model server, or fix the proxy's --upstream URL and restart it.",
        )
    else:
        seen = Check(
            "proxy upstream",
            "ok",
            f"The upstream {upstream} answers the proxy." if upstream else "The proxy's upstream answers it.",
        )
    return checks, seen


def _proxy_upstream(http: httpx.Client) -> str | None:
    """The proxy's upstream as its ``/kindling/status`` shows it (with ``KINDLING_PROXY_TOKEN``
    when set), or None when it does not say."""
    token = os.environ.get("KINDLING_PROXY_TOKEN")
    answer = http.get("/kindling/status", headers={"x-kindling-token": token} if token else {})
    if answer.status_code != 200 or not _is_json(answer):
        return None
    upstream = answer.json().get("upstream")
    return upstream if isinstance(upstream, str) else None


def check_upstream(upstream: str | None, timeout: float) -> Check:
    """The proxy's upstream answers HTTP (any status: a 401 without a key still answers)."""
    if not upstream:
        return Check("proxy upstream", "skip", "Not checked (pass --upstream URL, the proxy's --upstream).")
    try:
        with httpx.Client(timeout=timeout) as http:
            answer = http.get(upstream.rstrip("/") + "/models")
    except httpx.HTTPError as exc:
        return Check(
            "proxy upstream",
            "fail",
            f"The upstream {upstream} does not answer: {type(exc).__name__}.",
            "Start the model server, or fix the proxy's --upstream URL.",
        )
    return Check(
        "proxy upstream", "ok", f"The upstream {upstream} answers (GET /models: {answer.status_code})."
    )
