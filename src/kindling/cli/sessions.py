"""``kindling sessions`` (what a session source holds) and ``kindling sample`` (demo data)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from kindling.cli.common import (
    JsonOption,
    break_path,
    console,
    err_console,
    fixed_columns_width,
    print_json,
    progress_bar,
    show_progress,
)

_CONTENT_LIMIT = 1500
_ROLE_STYLES = {"system": "magenta", "user": "green", "assistant": "cyan", "tool": "yellow"}


def register(app: typer.Typer) -> None:
    """Add the ``sessions`` and ``sample`` commands to the root app."""
    app.command("sessions")(sessions_command)
    app.command("sample")(sample_command)


def sessions_command(
    sources: Annotated[
        list[str] | None,
        typer.Argument(
            help="Session sources: a Hermes state.db or Hermes home directory, a postgresql:// URL, "
            "a JSONL/JSON/.traj file, or a folder (every session file in it and its subfolders; "
            "~/.claude and ~/.codex are read where they keep their sessions). "
            "Default: $HERMES_HOME/state.db.",
            show_default=False,
        ),
    ] = None,
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help="Force a format: hermes, hermes-export, sharegpt, openai, tau-bench, tau2-bench, proxy, "
            "claude-code, codex, openhands, swe-agent, openai-agents.",
        ),
    ] = None,
    show: Annotated[
        str | None,
        typer.Option("--show", help="Print the session with this id readably ('latest': the newest)."),
    ] = None,
    list_sessions: Annotated[
        bool,
        typer.Option(
            "--list",
            "-l",
            help="List the sessions: id, started, source, messages, calls, failures, first request.",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Count what each source holds: sessions, messages, tool calls, tool results, skipped by reason.

    Every malformed thing (bad JSON, a tool result with no call, an unknown role, bytes that are not
    UTF-8, ...) is counted under its reason; a source that cannot be opened at all, or of which
    nothing reads in a format forced with --format, is one error line and exit code 2.

    Examples:

      kindling sessions ~/.hermes/state.db

      kindling sessions trajectories.jsonl.gz results.json --json

      kindling sessions ~/.claude ~/.codex

      kindling sessions ~/.hermes --list

      kindling sessions ~/.hermes --show 20260105_101500_a1b2c3

      kindling sessions ~/.hermes --show latest
    """
    from kindling.config import hermes_state_db
    from kindling.sessions import find_session_in, summarize_source

    if not sources and not hermes_state_db().exists():
        _no_default_source(hermes_state_db())
    paths: list[str] = list(sources) if sources else [str(hermes_state_db())]
    if show is not None:
        _source, session = find_session_in(paths, show, format)
        if json_output:
            print_json(session.as_dict())
        else:
            _print_session(session)
        return
    if list_sessions:
        _list(paths, format, json_output=json_output)
        return

    results: list[dict[str, Any]] = []
    with progress_bar(show_progress(json_output)) as progress:
        for source in paths:
            task = progress.add_task(f"Reading {source}", total=None) if progress is not None else None

            def tick(report: Any, task: Any = task) -> None:
                if progress is not None and task is not None and report.sessions % 50 == 0:
                    progress.update(task, completed=report.sessions)

            fmt, report = summarize_source(source, format, on_session=tick)
            if progress is not None and task is not None:
                progress.remove_task(task)
            results.append({"source": source, "format": fmt, **report.as_dict()})

    totals = _totals(results)
    if json_output:
        print_json({**totals, "sources": results})
        return
    _print_table(results, totals)
    if not totals["sessions"]:
        err_console.print(_SAMPLE_HINT, highlight=False, markup=False)


_SAMPLE_HINT = (
    "No sessions read. To try kindling on demo data: kindling sample, then "
    'kindling sessions "$(kindling sample --quiet)".'
)


def _no_default_source(default: Path) -> None:
    """Raise the error for ``kindling sessions`` without a source when Hermes has no state.db."""
    from kindling.errors import SourceError
    from kindling.sessions.folders import agent_homes

    homes = agent_homes()
    found = "; ".join(f"kindling sessions {folder} ({fmt} sessions are there)" for fmt, folder in homes)
    hint = f"read another agent's history: {found}" if found else "name a source: kindling sessions PATH"
    raise SourceError(
        f"No Hermes sessions at {default}. Try demo data with kindling sample, or {hint}.", path=default
    )


def _list(paths: list[str], format: str | None, *, json_output: bool) -> None:
    from kindling.mining.listing import list_sessions
    from kindling.sessions import ReadReport, iter_sessions

    report = ReadReport()
    rows: list[dict[str, Any]] = []
    for source in paths:
        for listing in list_sessions(iter_sessions(source, format, report=report)):
            rows.append({**listing.as_dict(), "path": source})
    if json_output:
        print_json({"sessions": rows, "skipped": dict(sorted(report.skipped.items()))})
        return
    _print_list(rows, multiple=len(paths) > 1)
    if report.skipped:
        skipped = ", ".join(f"{reason} {count:,}" for reason, count in sorted(report.skipped.items()))
        console.print(f"Skipped: {skipped}", markup=False, highlight=False)


def _print_list(rows: list[dict[str, Any]], *, multiple: bool) -> None:
    """Two lines a session: id, started, source and counts; under them, the first request.

    The id is what the reader came for, so it is never cut; at 80 columns the source column gives
    way first, then the time of day. The request takes the whole width of its own line.
    """
    width = max(40, console.width)
    ids = [row["id"] for row in rows]
    w_id = max([2, *(len(i) for i in ids)])
    w_source = max([6, *(len(row["source"]) for row in rows)])
    counts = ("msgs", "calls", "fail")
    w_counts = [
        max([len(label), *(len(f"{row[key]:,}") for row in rows)])
        for label, key in zip(counts, ("messages", "calls", "failures"), strict=True)
    ]
    with_time = True

    def used() -> int:
        return w_id + 2 + (16 if with_time else 10) + 2 + w_source + sum(w + 1 for w in w_counts)

    if used() > width:
        w_source = max(6, w_source - (used() - width))
    if used() > width:
        with_time = False
    w_started = 16 if with_time else 10

    def line(cells: list[str]) -> str:
        first, started, source, *numbers = cells
        source = source if len(source) <= w_source else source[: w_source - 1] + "…"
        text = f"{first:<{w_id}}  {started:<{w_started}}  {source:<{w_source}}"
        return text + "".join(f" {n:>{w}}" for n, w in zip(numbers, w_counts, strict=True))

    console.print(f"{len(rows):,} sessions", style="bold", highlight=False)
    console.print(line(["id", "started", "source", *counts]), style="bold", markup=False, highlight=False)
    console.print("    first request", style="dim", markup=False, highlight=False)
    for row in rows:
        started = _started(row["started_at"])
        cells = [row["id"], started if with_time else started[:10], row["source"]]
        cells += [f"{row[key]:,}" for key in ("messages", "calls", "failures")]
        console.print(line(cells), markup=False, highlight=False, overflow="fold")
        request = row["first_request"] or "-"
        if len(request) > width - 4:
            request = request[: width - 5] + "…"
        console.print(f"    {request}", style="dim", markup=False, highlight=False, no_wrap=True)
    if multiple:
        console.print("(--json names the source of each session)", style="dim")


def _started(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")


def _totals(results: list[dict[str, Any]]) -> dict[str, Any]:
    counted = ("sessions", "messages", "tool_calls", "tool_results", "user_tool_calls")
    totals: dict[str, Any] = dict.fromkeys(counted, 0)
    skipped: dict[str, int] = {}
    for result in results:
        for key in counted:
            totals[key] += result[key]
        for reason, count in result["skipped"].items():
            skipped[reason] = skipped.get(reason, 0) + count
    totals["skipped"] = dict(sorted(skipped.items()))
    return totals


def _print_table(results: list[dict[str, Any]], totals: dict[str, Any]) -> None:
    from rich import box
    from rich.table import Table

    def cells(row: dict[str, Any]) -> list[str]:
        counts = (row["sessions"], row["messages"], row["tool_calls"], row["tool_results"])
        return [f"{n:,}" for n in counts] + [f"{sum(row['skipped'].values()):,}"]

    headers = ["Format", "Sessions", "Messages", "Calls", "Results", "Skipped"]
    rows = [[result["format"], *cells(result)] for result in results]
    if len(results) > 1:
        rows.append(["", *cells(totals)])
    # Paths break between components to fit what the number columns leave, never mid-name.
    source_width = max(12, console.width - fixed_columns_width(rows, headers) - 4)
    table = Table(title="Session sources", box=box.SIMPLE_HEAD)
    table.add_column("Source", overflow="fold", min_width=source_width, ratio=1)
    table.add_column("Format", no_wrap=True)
    for label in headers[1:]:
        table.add_column(label, justify="right", no_wrap=True)
    for result, row in zip(results, rows, strict=False):
        table.add_row(Text(break_path(str(result["source"]), source_width)), *row)
    if len(results) > 1:
        table.add_row("total", *rows[-1], style="bold")
    console.print(table)
    if totals["user_tool_calls"]:
        # tau2-bench's simulated user calls tools too; those calls are not in the Calls column.
        console.print(f"Tool calls made by a simulated user (not the agent's): {totals['user_tool_calls']:,}")
    if totals["skipped"]:
        console.print("Skipped, by reason:")
        for reason, count in totals["skipped"].items():
            console.print(f"  {reason}: {count:,}", markup=False)


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _clip(text: str) -> str:
    if len(text) <= _CONTENT_LIMIT:
        return text
    return f"{text[:_CONTENT_LIMIT]}… [{len(text) - _CONTENT_LIMIT:,} more characters; --json shows all]"


def _print_session(session: Any) -> None:
    from rich.markup import escape

    console.print(f"[bold]Session {escape(session.id)}[/bold]")
    fields = [
        ("source", session.source),
        ("model", session.model or "-"),
        ("started", _when(session.started_at)),
        ("ended", _when(session.ended_at)),
        ("end reason", session.end_reason or "-"),
    ]
    if session.parent_id:
        fields.append(("parent", session.parent_id))
    if session.reward is not None:
        fields.append(("reward", f"{session.reward:g}"))
    fields.append(("messages", str(session.message_count)))
    for label, value in fields:
        console.print(f"  {label:<11} {escape(str(value))}")
    for index, message in enumerate(session.messages, start=1):
        style = _ROLE_STYLES.get(message.role, "white")
        header = f"[{style}]#{index} {message.role}[/{style}]"
        if message.role == "tool":
            flag = " [red](error)[/red]" if message.error else ""
            header += f" {escape(message.name or '')} ← {escape(message.tool_call_id or '')}{flag}"
        console.print()
        console.print(header)
        if message.content:
            console.print(_clip(message.content), markup=False, highlight=False)
        for call in message.tool_calls:
            arguments = (
                call.raw_arguments
                if call.raw_arguments is not None
                else call.as_dict()["function"]["arguments"]
            )
            who = "" if call.requestor == "assistant" else f" (by {call.requestor})"
            console.print(
                f"  → {call.name}({_clip(arguments)}) id={call.id}{who}", markup=False, highlight=False
            )


def sample_command(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Where to write the database. Default: $KINDLING_HOME/sample/state.db.", show_default=False
        ),
    ] = None,
    sessions: Annotated[
        int, typer.Option("--sessions", "-n", min=1, help="How many sessions to generate.")
    ] = 400,
    seed: Annotated[int, typer.Option("--seed", help="Random seed; the same seed gives the same data.")] = 7,
    force: Annotated[
        bool, typer.Option("--force", help="Regenerate even if the file exists (only a previous sample).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the path.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Write a realistic Hermes-style state.db of sample sessions and print its path.

    The data is deterministic for a seed: code, file, research, terminal and mixed tasks; short,
    mid-length and marathon sessions; real Hermes tool calls with a realistic share of failures.
    An existing sample is kept unless --force is given, or unless an older kindling wrote it (a
    sample of an earlier version is written again, with its sessions and seed); a file that is not
    a kindling sample is never overwritten.

    Examples:

      kindling sample

      kindling sample build/sample/state.db --sessions 3000 --seed 1 --force
    """
    from kindling.errors import StoreError
    from kindling.sessions.sample import SAMPLE_VERSION, default_sample_path, generate_sample_db, sample_info

    target = (path or default_sample_path()).expanduser()
    created = True
    outdated = None
    if target.exists() and not force:
        info = sample_info(target)
        if info is None:
            raise StoreError(
                f"{target} already exists and is not a kindling sample database; choose another path.",
                path=target,
            )
        sessions, seed = int(info.get("sessions", 0)), int(info.get("seed", 0))
        if info.get("version") == SAMPLE_VERSION:
            created = False
        else:
            # An older kindling's sample: the same sessions and seed, as this version writes them.
            outdated, force = info.get("version", "?"), True
    if created:
        with progress_bar(show_progress(json_output)) as progress:
            task = (
                progress.add_task("Writing sample sessions", total=sessions) if progress is not None else None
            )

            def advance(count: int) -> None:
                if progress is not None and task is not None:
                    progress.advance(task, count)

            generate_sample_db(target, sessions=sessions, seed=seed, overwrite=force, on_progress=advance)
    if json_output:
        print_json({"path": str(target), "created": created, "sessions": sessions, "seed": seed})
        return
    typer.echo(str(target))
    if not quiet:
        if outdated is not None:
            err_console.print(
                f"The sample was written by an older kindling (sample version {outdated}); wrote it again: "
                f"{sessions:,} sessions (seed {seed}).",
                highlight=False,
            )
        elif created:
            err_console.print(f"Wrote {sessions:,} sample sessions (seed {seed}).", highlight=False)
        else:
            err_console.print(
                "The sample already exists; kept it (use --force to regenerate).", highlight=False
            )
