"""``kindling eval``: replay held-out past sessions against a model, cold and warm, and compare.

A thin client of ``kindling.eval``: options in, the plan, the dry run or the run, a table out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from kindling.cli.common import JsonOption, console, err_console, print_json, progress_bar, show_progress

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
# Sent when the key's variable is unset: local servers take any key, hosted ones answer 401.
NO_KEY = "no-key"
_STAGES = {
    "read": "Reading sessions",
    "calls": "Reading calls",
    "templates": "Building fold templates",
    "cases": "Preparing held-out sessions",
}


def default_results() -> Path:
    """Where answers are kept unless ``--results`` says otherwise."""
    from kindling.config import kindling_home

    return kindling_home() / "eval" / "results.jsonl"


def _rate(value: float) -> str:
    return f"{value:.1%}"


def _points(value: float) -> str:
    return f"{value * 100:+.1f}"


def _span(row: dict[str, Any]) -> str:
    return f"{_points(row['ci_low'])} to {_points(row['ci_high'])}"


def _render_dry_run(data: dict[str, Any]) -> None:
    table = Table(title="Dry run: nothing was sent", show_header=False, title_justify="left")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("cases (steps replayed)", f"{data['cases']:,}")
    table.add_row("cases with a warm-up", f"{data['warmed_cases']:,}")
    table.add_row("distinct requests", f"{data['requests']:,}")
    table.add_row("already in the results file", f"{data['cached']:,}")
    table.add_row("requests to send", f"{data['to_send']:,}")
    if data["left_for_later"]:
        table.add_row("left for a later run (--max-requests)", f"{data['left_for_later']:,}")
    table.add_row("prompt tokens to send (estimated)", f"{data['prompt_tokens_to_send']:,}")
    table.add_row("prompt tokens per request, cold", f"{data['cold_tokens_per_request']:,.0f}")
    table.add_row("prompt tokens per request, warm", f"{data['warm_tokens_per_request']:,.0f}")
    table.add_row("added by the warm-up per request", f"{data['added_tokens_per_request']:,.0f}")
    if data["cost"] is not None:
        table.add_row(f"prompt cost at ${data['price_per_mtok']:g} per million", f"${data['cost']:,.4f}")
    console.print(table)
    console.print(f"Answers go to {data['results']}")


def _render(report: dict[str, Any]) -> None:
    cases = report["cases"]
    sessions = report["sessions"]
    console.print(
        f"{report['endpoint']['model']} at {report['endpoint']['base_url']}: {cases['scored']:,} steps scored "
        f"({cases['calls']:,} calls that worked, {cases['failed_calls']:,} that failed) from "
        f"{sessions['held_out_sessions']:,} held-out sessions of {sessions['tasks']:,} tasks; "
        f"{cases['warmed']:,} steps had a warm-up."
    )
    table = Table(title="Cold against warm (95% paired bootstrap interval, in points)", title_justify="left")
    table.add_column("metric")
    for column in ("steps", "cold", "warm", "difference", "95% interval", ""):
        table.add_column(column, justify="right", no_wrap=True)
    for row in report["metrics"]:
        label = row["label"] + ("" if row["higher_is_better"] else " (lower is better)")
        table.add_row(
            label,
            f"{row['cases']:,}",
            _rate(row["cold"]),
            _rate(row["warm"]),
            _points(row["difference"]),
            _span(row),
            row["outcome"],
        )
    console.print(table)
    if report["tools"]:
        per_tool = Table(title="Per tool the session called (right tool; right call)", title_justify="left")
        per_tool.add_column("tool")
        for column in ("steps", "cold", "warm", "difference", "95% interval", "right call"):
            per_tool.add_column(column, justify="right", no_wrap=True)
        for entry in report["tools"]:
            metrics = entry["metrics"]
            main = metrics.get("right_tool") or metrics.get("avoids_failure")
            if main is None:
                continue
            call = metrics.get("right_call")
            per_tool.add_row(
                entry["tool"] if "right_tool" in metrics else f"{entry['tool']} (failed: avoided)",
                f"{main['cases']:,}",
                _rate(main["cold"]),
                _rate(main["warm"]),
                _points(main["difference"]),
                _span(main),
                "-" if call is None else f"{_rate(call['cold'])} -> {_rate(call['warm'])}",
            )
        console.print(per_tool)
    tokens = report["tokens"]
    if tokens["added_per_request"] is not None:
        line = f"Tokens per request: {tokens['added_per_request']:+,.0f} with the warm-up ({tokens['from']})"
        if tokens["added_cost_per_request"] is not None:
            line += (
                f", ${tokens['added_cost_per_request'] * 1000:,.4f} per 1,000 requests at "
                f"${tokens['price_per_mtok']:g} per million"
            )
        console.print(line + ".")
    if report["schemas"]["none"]:
        console.print(
            f"No schema: {', '.join(report['schemas']['none'])} (no call of theirs worked and none was "
            "defined: their arguments are only checked to be a JSON object)."
        )
    requests = report["requests"]
    console.print(
        f"Requests this run: {requests['sent_this_run']:,} (retried {requests['retried']:,}); "
        f"answers kept in {requests['results']}."
    )
    if cases["unanswered"] or cases["rejected"]:
        console.print(
            f"Not scored: {cases['unanswered']:,} steps still without both answers, "
            f"{cases['rejected']:,} the endpoint rejected."
        )
    console.print(f"[bold]{report['verdict']['line']}[/bold]", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``eval`` command to the root app."""

    @app.command("eval")
    def eval_command(
        sources: Annotated[
            list[str],
            typer.Argument(
                help="Past sessions: anything kindling reads (a Hermes state.db, JSONL exports, tau-bench "
                "results, a folder of them). Each SOURCE is one agent set-up: its tools are the ones its "
                "sessions called.",
                show_default=False,
                metavar="SOURCE",
            ),
        ],
        base_url: Annotated[
            str,
            typer.Option(
                "--base-url",
                help="The model's endpoint: the base URL of an OpenAI-compatible API (OpenAI's ends in "
                "/v1), or of Anthropic's with --format anthropic.",
            ),
        ],
        model: Annotated[str, typer.Option("--model", help="The model to evaluate.")],
        api_key_env: Annotated[
            str, typer.Option("--api-key-env", help="Environment variable holding the API key.")
        ] = DEFAULT_KEY_ENV,
        api_format: Annotated[
            str, typer.Option("--format", help="The endpoint's API: openai (chat completions) or anthropic.")
        ] = "openai",
        source_format: Annotated[
            str | None,
            typer.Option("--source-format", help="Force the sessions' format instead of detecting it."),
        ] = None,
        folds: Annotated[int, typer.Option(help="Folds the sessions are split into, by task.")] = 5,
        steps: Annotated[
            int,
            typer.Option(
                help="Replay each held-out session's first N tool-call steps (and first N failed calls)."
            ),
        ] = 3,
        sessions: Annotated[
            int | None,
            typer.Option(
                help="Replay at most N held-out sessions, drawn at random (default: every session)."
            ),
        ] = None,
        seed: Annotated[int, typer.Option(help="Seed of the split, the draw and the bootstrap.")] = 0,
        similarity: Annotated[
            float,
            typer.Option(help="Two task texts this similar (word Jaccard) are one task, kept on one side."),
        ] = 0.6,
        budget: Annotated[
            int | None, typer.Option(help="Token budget of a warm-up (default: the proxy's).")
        ] = None,
        min_messages: Annotated[
            int | None,
            typer.Option(help="Mine training sessions of at least N messages (default: kindling build's)."),
        ] = None,
        keep_personal_data: Annotated[
            bool,
            typer.Option(
                "--keep-personal-data",
                help="Send the held-out sessions' names, ids and addresses as recorded (credentials stay "
                "hidden). Default: typed placeholders, as in a warm-up.",
            ),
        ] = False,
        results: Annotated[
            Path | None,
            typer.Option(
                help="Results file: every answer, kept so a run resumes and a re-run costs nothing "
                "(default: eval/results.jsonl in KINDLING_HOME).",
                dir_okay=False,
            ),
        ] = None,
        concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight at once.")] = 4,
        max_requests: Annotated[
            int | None,
            typer.Option(min=0, help="Send at most N requests this run; run again to continue."),
        ] = None,
        retries: Annotated[
            int, typer.Option(min=0, help="Retries of a request answered 429/5xx or not answered.")
        ] = 6,
        price_per_mtok: Annotated[
            float | None,
            typer.Option("--price-per-mtok", min=0, help="Price of a million prompt tokens, for costs."),
        ] = None,
        sampling: Annotated[
            str,
            typer.Option(
                help="fixed: send --temperature and --max-tokens; default: send neither (for models that "
                "take only their own, such as OpenAI's reasoning models)."
            ),
        ] = "fixed",
        temperature: Annotated[float, typer.Option(help="Sampling temperature of every request.")] = 0.0,
        max_tokens: Annotated[
            int, typer.Option(min=1, help="Largest answer of a request, in tokens.")
        ] = 1024,
        dry_run: Annotated[
            bool,
            typer.Option("--dry-run", help="Print how many requests and tokens a run would send; send none."),
        ] = False,
        plot: Annotated[
            Path | None,
            typer.Option(
                "--plot", help="Also draw cold against warm per metric (.png, .svg or .pdf).", dir_okay=False
            ),
        ] = None,
        json_output: JsonOption = False,
    ) -> None:
        """Show whether warming helps: replay held-out sessions against your model, cold and warm.

        The sessions are split into folds by task (a benchmark's task id, or near-identical opening
        requests), each fold's template is built from the other folds, and at each held-out
        session's first tool-call steps the model gets the conversation so far twice: as recorded
        (cold) and with the warm-up the proxy would insert (warm). Each answer is scored against
        the call the session made: the same tool, valid arguments, the key arguments, a known
        failure, no call where one was due; at a call that failed, whether the error is avoided.
        The report gives each figure cold and warm with a 95% paired bootstrap interval, per tool,
        the tokens the warm-up adds, and a verdict: better, worse, or not distinguishable at this
        sample size.

        Every answer is kept in the results file: an interrupted run resumes where it stopped and
        a re-run sends nothing. Start with --dry-run to see what a run would send.

        Examples:

            kindling eval ~/.hermes/state.db --base-url https://api.openai.com/v1 --model gpt-4.1 --dry-run

            kindling eval runs/ --base-url http://localhost:11434/v1 --model qwen3 --sessions 50

            kindling eval runs/ --format anthropic --base-url https://api.anthropic.com --model claude-sonnet-4-5 --api-key-env ANTHROPIC_API_KEY --price-per-mtok 3
        """
        from kindling.errors import ConfigError
        from kindling.eval import Endpoint, EvalOptions, estimate, plan_eval, run_eval

        if sampling not in ("fixed", "default"):
            raise ConfigError(f"Unknown --sampling {sampling!r}; use fixed or default.")
        fixed = sampling == "fixed"
        endpoint = Endpoint(
            base_url, model, api_format, temperature if fixed else None, max_tokens if fixed else None
        )
        endpoint.check()
        if plot is not None:
            from kindling.eval.plot import plot_format

            plot_format(plot)  # a bad extension fails before the sessions are read
        options = EvalOptions(
            folds=folds,
            steps=steps,
            sessions=sessions,
            seed=seed,
            similarity=similarity,
            budget=budget,
            min_messages=min_messages,
            keep_personal_data=keep_personal_data,
            source_format=source_format,
        )
        results_path = results or default_results()
        with progress_bar(show_progress(json_output)) as progress:
            tasks: dict[str, Any] = {}

            def planning(stage: str, done: int, total: int) -> None:
                if progress is None:
                    return
                if stage not in tasks:
                    tasks[stage] = progress.add_task(_STAGES.get(stage, stage), total=total)
                progress.update(tasks[stage], completed=done, total=total)

            with plan_eval(sources, options, on_progress=planning) as plan:
                if dry_run:
                    figures = estimate(
                        plan,
                        endpoint,
                        results=results_path,
                        max_requests=max_requests,
                        price_per_mtok=price_per_mtok,
                    )
                    if json_output:
                        print_json({"dry_run": figures, "sessions": plan.counts})
                    else:
                        _render_dry_run(figures)
                    return
                api_key = os.environ.get(api_key_env, "")
                if not api_key:
                    err_console.print(
                        f"No key in ${api_key_env}: sending none (a local endpoint may not need one)."
                    )

                def asking(done: int, total: int) -> None:
                    if progress is None:
                        return
                    if "ask" not in tasks:
                        tasks["ask"] = progress.add_task("Asking the model", total=total)
                    progress.update(tasks["ask"], completed=done, total=total)

                report = run_eval(
                    plan,
                    endpoint,
                    api_key=api_key or NO_KEY,
                    results=results_path,
                    concurrency=concurrency,
                    max_requests=max_requests,
                    retries=retries,
                    price_per_mtok=price_per_mtok,
                    seed=seed,
                    on_progress=asking,
                )
        if plot is not None:
            from kindling.eval.plot import plot_report

            plot_report(report, plot)
            report["plot"] = str(plot)
        if json_output:
            print_json(report)
            return
        _render(report)
        if plot is not None:
            console.print(f"Plot written to {plot}")
