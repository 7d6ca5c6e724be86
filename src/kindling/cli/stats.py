"""``kindling stats``: tool-call failure rates by tool and by session length, as a table, JSON or PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from kindling.cli.common import JsonOption, console, print_json, progress_bar, show_progress

DEFAULT_TOP = 15
_LESSONS_PER_TOOL = 8  # error classes per tool in the lessons table (--json lists all)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _interval(row: dict[str, Any]) -> str:
    if row.get("ci_low") is None:
        return "-"
    return f"{row['ci_low'] * 100:.1f}–{row['ci_high'] * 100:.1f}%"


def _render(data: dict[str, Any], *, by_tool: bool, top: int) -> None:
    summary = Table(title="Sessions read", show_header=False, title_justify="left")
    summary.add_column("what")
    summary.add_column("count", justify="right")
    for label, key in (
        ("sessions", "sessions"),
        ("messages", "messages"),
        ("tool calls (agent)", "tool_calls"),
        ("results paired", "results_paired"),
        ("results failed", "results_failed"),
        ("results unknown (empty)", "results_unknown"),
        ("calls never answered", "calls_unanswered"),
    ):
        summary.add_row(label, f"{data[key]:,}")
    if data["rewarded"]:
        summary.add_row("sessions with a reward", f"{data['rewarded']:,}")
        summary.add_row("tasks succeeded (reward 1)", f"{data['successes']:,}")
    for reason, count in data["skipped"].items():
        summary.add_row(f"skipped: {reason}", f"{count:,}")
    console.print(summary)

    cohorts = Table(title="Failure rate by session length (Wilson 95% interval)", title_justify="left")
    cohorts.add_column("cohort", no_wrap=True)
    for column in ("msgs", "sessions", "calls", "results", "failed", "rate", "95% CI"):
        cohorts.add_column(column, justify="right", no_wrap=True)
    for name, row in data["cohorts"].items():
        span = (
            f"{row['min_messages']}-{row['max_messages']}"
            if row["max_messages"] is not None
            else f">= {row['min_messages']}"
        )
        cohorts.add_row(
            name,
            span,
            f"{row['sessions']:,}",
            f"{row['calls']:,}",
            f"{row['results']:,}",
            f"{row['failures']:,}",
            _percent(row["failure_rate"]),
            _interval(row),
        )
    console.print(cohorts)
    if data["rewarded"]:
        _render_success(data)
    comparison = data["comparison"]
    if comparison["significant"] is not None:
        first, second = comparison["cohorts"]
        verdict = (
            "the intervals do not overlap: a real difference"
            if comparison["significant"]
            else "the intervals overlap: not a clear difference"
        )
        console.print(f"{first} vs {second}: {comparison['difference'] * 100:+.1f} points; {verdict}.\n")

    tools = list(data["tools"].items())[:top]
    cohort_names = list(data["cohorts"])
    if by_tool:
        title = f"Failure rate per tool and cohort (top {len(tools)} tools by calls; 95% CI below)"
    else:
        title = f"Tools (top {len(tools)} by calls)"
    table = Table(title=title, title_justify="left")
    table.add_column("tool", no_wrap=True)
    columns = ("calls", "rate", *cohort_names) if by_tool else ("calls", "results", "failed", "rate")
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for tool, row in tools:
        cells = [tool, f"{row['calls']:,}"]
        if not by_tool:
            cells += [f"{row['results']:,}", f"{row['failures']:,}"]
        cells.append(_percent(row["failure_rate"]))
        if by_tool:
            for name in cohort_names:
                per = data["cohorts"][name]["tools"].get(tool)
                if not per or per["failure_rate"] is None:
                    cells.append("-")
                else:
                    # Rate over interval on two lines, so four cohort columns fit 80 columns.
                    cells.append(f"{_percent(per['failure_rate'])}\n{_interval(per)}")
        table.add_row(*cells)
    console.print(table)

    types = Table(title="Task types", caption="by dominant tool family", title_justify="left")
    types.add_column("type")
    types.add_column("sessions", justify="right")
    for name, count in data["task_types"].items():
        types.add_row(name, f"{count:,}")
    console.print(types)


def _success_interval(row: dict[str, Any]) -> str:
    if row.get("success_ci_low") is None:
        return "-"
    return f"{row['success_ci_low'] * 100:.1f}–{row['success_ci_high'] * 100:.1f}%"


def _render_success(data: dict[str, Any]) -> None:
    """Task success beside tool failure, per cohort (only sources that record a reward)."""
    table = Table(title="Task success beside tool failure, by session length", title_justify="left")
    table.add_column("cohort", no_wrap=True)
    for column in ("rewarded", "succeeded", "success", "95% CI", "tool failure"):
        table.add_column(column, justify="right", no_wrap=True)
    for name, row in data["cohorts"].items():
        table.add_row(
            name,
            f"{row['rewarded']:,}",
            f"{row['successes']:,}",
            _percent(row["success_rate"]),
            _success_interval(row),
            _percent(row["failure_rate"]),
        )
    console.print(table)


def _lessons(paths: list[str | Path], format: str | None, report: Any, json_output: bool, top: int) -> None:
    from kindling.mining.lessons import lessons_by_tool, mine_lessons
    from kindling.sessions import iter_sessions

    # Every source is opened before any is read, so a bad path fails at once.
    streams = [iter_sessions(path, format, report=report) for path in paths]
    with progress_bar(show_progress(json_output)) as progress:
        task = progress.add_task("Reading sessions", total=None) if progress is not None else None

        def sessions() -> Any:
            for stream in streams:
                for session in stream:
                    if progress is not None and task is not None:
                        progress.advance(task, 1)
                    yield session

        found = lessons_by_tool(mine_lessons(sessions()))
    if json_output:
        print_json(
            {
                "sessions": report.sessions,
                "skipped": dict(sorted(report.skipped.items())),
                "tools": {tool: [x.model_dump(mode="json") for x in items] for tool, items in found.items()},
            }
        )
        return
    if not found:
        console.print(f"No failed call in {report.sessions:,} sessions: no lessons.")
        return
    table = Table(
        title=f"Lessons per tool ({report.sessions:,} sessions read; top {min(top, len(found))} tools)",
        title_justify="left",
    )
    for column in ("tool", "error class", "sessions", "fixed", "what worked next"):
        table.add_column(column, justify="right" if column in ("sessions", "fixed") else "left")
    for tool, items in list(found.items())[:top]:
        for index, lesson in enumerate(items[:_LESSONS_PER_TOOL]):
            fix = next((p.fix for p in lesson.pairs if p.fix is not None), None)
            table.add_row(
                tool if index == 0 else "",
                lesson.error_class,
                f"{lesson.sessions:,}",
                f"{lesson.fixed:,}",
                fix.tool_name if fix is not None else "-",
            )
        if len(items) > _LESSONS_PER_TOOL:
            more = items[_LESSONS_PER_TOOL:]
            table.add_row(
                "",
                f"({len(more)} more classes; --json lists all)",
                f"{sum(x.sessions for x in more):,}",
                "",
                "",
            )
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add the ``stats`` command to the root app."""

    @app.command("stats")
    def stats_command(
        sources: Annotated[
            list[str] | None,
            typer.Argument(
                help="Session sources: a Hermes state.db, a postgresql:// URL, JSONL exports, tau-bench "
                "results. Several are read as one. Default: $HERMES_HOME/state.db.",
                show_default=False,
                metavar="SOURCE",
            ),
        ] = None,
        format: Annotated[
            str | None,
            typer.Option("--format", "-f", help="Force the source format instead of detecting it."),
        ] = None,
        plot: Annotated[
            Path | None,
            typer.Option(
                "--plot",
                help="Also draw failure rate by cohort to this file (.png, .svg or .pdf, by its extension).",
                dir_okay=False,
            ),
        ] = None,
        by_tool: Annotated[
            bool,
            typer.Option(
                "--by-tool", help="Break failure rates down per tool in each cohort (table and plot)."
            ),
        ] = False,
        top: Annotated[
            int, typer.Option("--top", min=1, help="How many tools to show, most-called first.")
        ] = DEFAULT_TOP,
        lessons: Annotated[
            bool,
            typer.Option(
                "--lessons",
                help="List the lessons instead: per tool, each kind of failure (error class), in how many "
                "sessions, and what worked next.",
            ),
        ] = False,
        json_output: JsonOption = False,
    ) -> None:
        """Report tool-call failure rates by tool and by session length, and task success where a reward exists.

        Every call the agent made is paired with its result by id and judged ok, failed or unknown
        by the outcome rules (extend them in $KINDLING_HOME/mining.json). Sessions are grouped by
        length: short (< 20 messages), mid (20-99) and marathon (>= 100), each with a Wilson 95%
        interval so you can see whether a difference is real. Sources that record a reward
        (tau-bench, tau2-bench) also get task success per cohort (reward 1.0 is success) beside
        the tool failure rate.

        Examples:

            kindling stats ~/.hermes/state.db

            kindling stats runs/*.jsonl --by-tool --plot failures.png

            kindling stats state.db --json | jq .cohorts.marathon

            kindling stats runs/*.jsonl --lessons

        With --lessons, the failed calls are listed per tool instead, grouped by error class (the
        error with its values normalised), with how many sessions met each and the next call that
        worked in the same turn, over every session read (``kindling build`` keeps the same as a
        template's lessons, from the sessions its filters keep).
        """
        from kindling.config import hermes_state_db
        from kindling.mining import mine_sources
        from kindling.sessions.model import ReadReport

        if plot is not None:
            from kindling.mining.plot import plot_format

            plot_format(plot)  # a bad extension fails before the sources are read, not after
        report = ReadReport()
        paths: list[str | Path] = list(sources) if sources else [hermes_state_db()]
        if lessons:
            _lessons(paths, format, report, json_output, top)
            return
        with progress_bar(show_progress(json_output)) as progress:
            task = None
            if progress is not None:
                from kindling.sessions.sources import estimate_sessions

                # A known total (Hermes databases) turns "16100/?" into a bar with an end.
                task = progress.add_task("Reading sessions", total=estimate_sessions(paths, format))

            def advance(sessions: int) -> None:
                if progress is not None and task is not None:
                    progress.advance(task, sessions)

            # Every source is opened before any is read, so a bad path fails at once. A big Hermes
            # database is read in worker processes; the figures are the same as in one pass.
            stats = mine_sources(
                paths, format=format, report=report, on_progress=advance, max_examples=0
            ).stats
        data = stats.as_dict()
        if plot is not None:
            from kindling.mining.plot import plot_failure_rates

            plot_failure_rates(data, plot, by_tool=by_tool, top=top)  # the tools the table lists
        if json_output:
            if plot is not None:
                data["plot"] = str(plot)
            print_json(data)
            return
        _render(data, by_tool=by_tool, top=top)
        if plot is not None:
            console.print(f"Plot written to {plot}")
