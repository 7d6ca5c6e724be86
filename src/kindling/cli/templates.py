"""``kindling build``, ``kindling templates ...``, ``kindling warm`` and ``kindling inject``.

A thin client of :mod:`kindling.templates` and :mod:`kindling.warmup`: parse options, call, print.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.text import Text

from kindling.cli.common import (
    JsonOption,
    StoreOption,
    console,
    err_console,
    print_json,
    print_records,
    progress_bar,
    show_progress,
)

if TYPE_CHECKING:
    from kindling.templates.store import TemplateStore

BudgetOption = Annotated[
    int, typer.Option("--budget", "-b", min=0, help="Token budget for the warm messages (estimate: chars/4).")
]
StyleOption = Annotated[
    str,
    typer.Option(
        "--style",
        help="triples: request, tool call, result per example. closed: adds a one-line assistant reply "
        "after each result, for chat templates that demand strict alternation.",
    ),
]
AutoOption = Annotated[
    bool,
    typer.Option(
        "--auto",
        help="Choose the template whose past tasks fit the task best (type, tags, least used break ties).",
    ),
]
FormatOption = Annotated[
    str, typer.Option("--format", "-f", help="Message format: openai, or anthropic (Messages API).")
]
RecordOption = Annotated[
    bool, typer.Option("--record/--no-record", help="Count this as a use of the template.")
]
LessonsOption = Annotated[
    bool,
    typer.Option(
        "--lessons/--no-lessons",
        help="Also show the template's lessons: past failures of the tools shown and what worked next "
        "(at most a quarter of the tokens).",
    ),
]
ToolsOption = Annotated[
    str | None,
    typer.Option(
        "--tools",
        help="The agent's tools, comma-separated (a,b,c): no other tool is shown. "
        "Default: any (inject also reads the tools array of a request body).",
        show_default=False,
    ),
]
MaxExamplesOption = Annotated[
    int, typer.Option("--max-examples", min=1, help="At most this many examples in the warm messages.")
]


def _store(target: str | None) -> TemplateStore:
    from kindling.templates.store import open_store

    return open_store(target)


def _warn_problems(store: TemplateStore) -> None:
    for problem in store.problems:
        # One line per problem (no wrapping), naming the file or row once.
        where = "" if problem.location in problem.reason else f" {problem.location}"
        err_console.print(f"Skipped{where}: {problem.reason}", markup=False, highlight=False, soft_wrap=True)


def _tools(option: str | None) -> list[str] | None:
    if option is None:
        return None
    return [t.strip() for t in option.split(",") if t.strip()]


def _pick_name(name: str | None, auto: bool) -> str | None:
    from kindling.errors import ConfigError

    if name and auto:
        raise ConfigError("Give a template NAME or --auto, not both.")
    return name or None


def _warm_store(store: TemplateStore, name: str | None) -> TemplateStore:
    """Where a warm-up looks: a named template anywhere in ``store``; without a name, only the
    default tenant's own and shared templates (never another tenant's, which the proxy builds)."""
    from kindling.templates.store import DEFAULT_TENANT, TenantTemplates

    return store if name else TenantTemplates(store, DEFAULT_TENANT)


def _print_messages(messages: list[dict[str, Any]], *, system: str = "") -> None:
    # Every value on lines of its own, never wrapped by us (the terminal wraps long ones): a call's
    # arguments and a result stay valid JSON to copy at any width.
    if system:
        console.print("[bold magenta]system[/]")
        console.print(system, markup=False, highlight=False, soft_wrap=True)
    for message in messages:
        role = message.get("role", "?")
        console.print(f"[bold cyan]{role}[/]")
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                kind = block.get("type")
                if kind == "text":
                    console.print(block.get("text", ""), markup=False, highlight=False, soft_wrap=True)
                elif kind == "tool_use":
                    args = orjson.dumps(block.get("input", {})).decode()
                    console.print(
                        f"→ {block.get('name')}({args})  [{block.get('id')}]",
                        markup=False,
                        highlight=False,
                        soft_wrap=True,
                    )
                elif kind == "tool_result":
                    console.print(
                        f"← [{block.get('tool_use_id')}]", markup=False, highlight=False, soft_wrap=True
                    )
                    console.print(
                        str(block.get("content", "")), markup=False, highlight=False, soft_wrap=True
                    )
            continue
        if content:
            console.print(str(content), markup=False, highlight=False, soft_wrap=True)
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            console.print(
                f"→ {function.get('name')}({function.get('arguments')})  [{call.get('id')}]",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


_SHOWN_RESULT = 400  # characters of a result ``templates show`` prints; --json has them all


def _print_example(number: int, example: Any) -> None:
    """One example as a block: every value whole on its own line (the terminal wraps long ones), so
    arguments stay valid JSON to copy; a long result ends in a marker saying how much is left out."""
    seen = f"  ×{example.count}" if example.count > 1 else ""
    console.print(Text.assemble((f"{number}. ", "bold"), (example.tool_name, "bold cyan"), seen))
    arguments = example.raw_arguments if example.raw_arguments is not None and not example.arguments else None
    result = example.result
    if len(result) > _SHOWN_RESULT:
        result = result[:_SHOWN_RESULT] + f"… (+{len(result) - _SHOWN_RESULT:,} characters; --json shows all)"
    for label, value in (
        ("request", example.context or "-"),
        (
            "arguments",
            arguments if arguments is not None else json.dumps(example.arguments, ensure_ascii=False),
        ),
        ("result", result or "-"),
    ):
        body = value.replace("\n", "\n" + " " * 14)
        console.print(Text.assemble((f"   {label:<10} ", "dim"), body), soft_wrap=True, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``build``, the ``templates`` group, ``warm`` and ``inject`` to the root app."""

    @app.command("build")
    def build_command(
        name: Annotated[str, typer.Argument(help="Template name: letters, digits, '-', '_', '.'.")],
        sources: Annotated[
            list[str] | None,
            typer.Argument(
                help="Session sources (Hermes state.db, postgresql:// URL, JSONL, tau-bench results). "
                "Default: $HERMES_HOME/state.db.",
                show_default=False,
            ),
        ] = None,
        store: StoreOption = None,
        description: Annotated[
            str | None,
            typer.Option("--description", "-d", help="What the template is for. Default on a rebuild: kept."),
        ] = None,
        task_type: Annotated[
            str | None,
            typer.Option(
                "--task-type",
                help="code, file, research, terminal or mixed. Default: kept on a rebuild, else the "
                "type of the mined calls.",
            ),
        ] = None,
        tags: Annotated[
            list[str] | None,
            typer.Option("--tag", "-t", help="A tag (repeat for several). Default on a rebuild: kept."),
        ] = None,
        system_prompt: Annotated[
            str | None,
            typer.Option(
                "--system-prompt",
                help="System prompt addendum injected with the examples. Default on a rebuild: kept.",
            ),
        ] = None,
        min_messages: Annotated[
            int | None,
            typer.Option(
                "--min-messages",
                min=0,
                help="Skip sessions shorter than this. Default: 20, or 3 when every source is a store "
                "kindling's proxy recorded (chats are short).",
                show_default=False,
            ),
        ] = None,
        max_sessions: Annotated[
            int | None, typer.Option("--max-sessions", min=0, help="Stop after mining this many sessions.")
        ] = None,
        source_filter: Annotated[
            list[str] | None,
            typer.Option(
                "--source-filter", help="Only sessions whose source matches this glob (repeatable)."
            ),
        ] = None,
        max_examples: Annotated[
            int | None,
            typer.Option(
                "--max-examples",
                min=1,
                help="Keep at most this many examples (tools take turns, so every tool keeps one first).",
            ),
        ] = None,
        per_tool: Annotated[
            int, typer.Option("--per-tool", min=1, help="Keep at most this many examples of each tool.")
        ] = 20,
        format: Annotated[
            str | None,
            typer.Option("--format", "-f", help="Force the source format instead of detecting it."),
        ] = None,
        keep_personal_data: Annotated[
            bool,
            typer.Option(
                "--keep-personal-data",
                help="Keep ids, names, e-mails, addresses... as they were instead of typed placeholders "
                "(<user_id_1>). Credentials are hidden either way.",
            ),
        ] = False,
        tenant: Annotated[
            str | None,
            typer.Option(
                "--tenant",
                help="From a proxy store: mine this tenant's conversations only; the template is the "
                "tenant's (no other tenant warms from it unless it is shared).",
                show_default=False,
            ),
        ] = None,
        all_tenants: Annotated[
            bool,
            typer.Option(
                "--all-tenants", help="From a proxy store holding several tenants: mine all of them together."
            ),
        ] = False,
        trust_client_history: Annotated[
            bool,
            typer.Option(
                "--trust-client-history",
                help="From a proxy store imported from elsewhere: mine the assistant turns the proxy never "
                "relayed too (marked unverified). Default: only replies the proxy relayed are mined.",
            ),
        ] = False,
        json_output: JsonOption = False,
    ) -> None:
        """Mine past sessions into a named template: the successful past tasks and the calls that worked.

        Rebuilding an existing name makes a new version (none when nothing changed) and keeps its
        type, tags, description and system prompt unless given. A rebuild that changes a shared
        template saves it unshared (share it again after reviewing it).

        Examples:

            kindling build coding ~/.hermes/state.db --tag python

            kindling build web runs/*.jsonl --task-type research --min-messages 5 --json

            kindling build main "$(kindling proxy path)" --tenant default
        """
        from kindling.config import hermes_state_db
        from kindling.templates.build import build_template_with_report

        filters: dict[str, Any] = {"min_messages": min_messages, "max_sessions": max_sessions}
        if source_filter:
            filters["source_filter"] = list(source_filter)
        if max_examples is not None:
            filters["max_examples"] = max_examples
        if keep_personal_data:
            filters["keep_personal_data"] = True
        paths: list[str | Path] = list(sources) if sources else [hermes_state_db()]
        opened = _store(store)
        with progress_bar(show_progress(json_output)) as progress:
            task = None
            if progress is not None:
                from kindling.sessions.sources import estimate_sessions

                # A known total (Hermes databases) turns "16100/?" into a bar with an end.
                task = progress.add_task("Mining sessions", total=estimate_sessions(paths, format))

            def advance(sessions_read: int) -> None:
                if progress is not None and task is not None:
                    progress.advance(task, sessions_read)

            result = build_template_with_report(
                name,
                paths,
                store=opened,
                description=description,
                task_type=task_type,
                tags=tags or None,
                system_prompt_addendum=system_prompt,
                format=format,
                on_progress=advance,
                per_tool=per_tool,
                tenant=tenant,
                all_tenants=all_tenants,
                trust_client_history=trust_client_history,
                **filters,
            )
        _warn_problems(opened)  # e.g. the file it replaced was corrupt (a copy is kept)
        if json_output:
            print_json(result.as_dict())
            return
        t = result.template
        verb = "Unchanged (no new version):" if result.unchanged else "Saved"
        console.print(
            f"{verb} template [bold]{t.name}[/] v{t.version}: {len(t.examples)} examples, "
            f"{len(t.episodes)} past tasks, type {t.task_type}, tools {', '.join(t.summary()['tools'])}."
        )
        skipped = ", ".join(f"{reason} {count:,}" for reason, count in sorted(result.report.skipped.items()))
        console.print(
            f"Read {result.report.sessions:,} sessions; mined {result.mining.sessions_mined:,}"
            + (f"; skipped {skipped}" if skipped else "")
            + ".",
            markup=False,
            highlight=False,
        )
        filtered = result.mining.filtered
        dropped = filtered.get("prompt_injection", 0) + filtered.get("after_prompt_injection", 0)
        dropped_tasks = filtered.get("prompt_injection_episodes", 0)
        if dropped or dropped_tasks:
            console.print(
                f"Dropped {dropped:,} examples and {dropped_tasks:,} past tasks whose request, arguments "
                "or results give the agent instructions (prompt injection), or that came after such a "
                "result in its session.",
                markup=False,
                highlight=False,
            )
        if t.tenant:
            console.print(
                f"Tenant {t.tenant}: no other tenant warms from it unless it is shared.",
                markup=False,
                soft_wrap=True,
            )
        if result.unshared:
            console.print(
                f"It was shared; this version holds something new and is not: review it and share it again "
                f"with `kindling templates share {t.name}`.",
                markup=False,
                soft_wrap=True,
            )

    templates_app = typer.Typer(
        help="List, show, delete, export and import templates, and show where they are stored.\n\n"
        "Without a command it lists them (as 'kindling templates list'). The default store is the "
        "variable KINDLING_TEMPLATE_STORE when set, else the templates folder under KINDLING_HOME.",
        invoke_without_command=True,
    )
    app.add_typer(templates_app, name="templates")
    from kindling.cli import sharing

    sharing.register(templates_app)

    @templates_app.callback()
    def templates_group(
        ctx: typer.Context, store: StoreOption = None, json_output: JsonOption = False
    ) -> None:
        from kindling.errors import ConfigError

        if ctx.invoked_subcommand is None:
            list_command(store, json_output)
        elif store is not None or json_output:
            raise ConfigError(
                f"Give --store and --json after the command: kindling templates {ctx.invoked_subcommand} ..."
            )

    @templates_app.command("list")
    def list_command(store: StoreOption = None, json_output: JsonOption = False) -> None:
        """List the templates in the store (corrupt ones are reported on stderr and skipped)."""
        opened = _store(store)
        templates = opened.list()
        _warn_problems(opened)
        if json_output:
            print_json(
                {
                    "templates": [t.summary() for t in templates],
                    "problems": [{"location": p.location, "reason": p.reason} for p in opened.problems],
                }
            )
            return
        if not templates:
            console.print(f"No templates in {opened.location}. Build one with `kindling build NAME SOURCE`.")
            return
        rows = [
            [
                t.name,
                t.task_type or "-",
                ", ".join(t.tags) or "-",
                str(len(t.examples)),
                str(t.version),
                str(t.usage_count),
                t.updated_at,
            ]
            for t in templates
        ]
        print_records(
            ["name", "type", "tags", "examples", "version", "uses", "updated"],
            rows,
            title=f"Templates in {opened.location}",
            right=frozenset({"examples", "version", "uses"}),
        )

    @templates_app.command("show")
    def show_command(
        name: Annotated[str, typer.Argument(help="Template name.")],
        version: Annotated[int | None, typer.Option("--version", "-v", help="An earlier version.")] = None,
        provenance: Annotated[
            bool,
            typer.Option(
                "--provenance",
                help="Where each example and past task came from: source, session, tenant, verified or not.",
            ),
        ] = False,
        store: StoreOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Show one template: its fields, versions, examples and lessons (or, with --provenance, where they
        came from)."""
        opened = _store(store)
        template = opened.get(name, version)
        versions = opened.versions(name)
        if provenance:
            from kindling.cli.sharing import print_provenance
            from kindling.templates.provenance import provenance_rows, provenance_summary

            if json_output:
                data = {"name": template.name, "version": template.version, "tenant": template.tenant}
                print_json(
                    {
                        **data,
                        "shared": template.shared,
                        "summary": provenance_summary(template),
                        "provenance": provenance_rows(template),
                    }
                )
            else:
                print_provenance(template)
            return
        if json_output:
            print_json({**template.model_dump(mode="json"), "versions": versions})
            return
        summary = template.summary()
        for key in (
            "name",
            "description",
            "task_type",
            "tags",
            "version",
            "usage_count",
            "created_at",
            "updated_at",
            "tenant",
            "shared",
        ):
            value = summary[key]
            console.print(f"[bold]{key}[/]: {', '.join(value) if isinstance(value, list) else value}")
        console.print(f"[bold]versions[/]: {', '.join(str(v) for v in versions)}")
        if template.system_prompt_addendum:
            console.print("[bold]system_prompt_addendum[/]:")
            console.print(template.system_prompt_addendum, markup=False, highlight=False)
        console.print(f"[bold]examples[/]: {len(template.examples)}")
        for number, example in enumerate(template.examples, start=1):
            _print_example(number, example)
        if template.lessons:
            from kindling.warmup.build import lesson_line

            console.print(f"[bold]lessons[/]: {len(template.lessons)}")
            for lesson in template.lessons:
                console.print(lesson_line(lesson), markup=False, highlight=False)

    @templates_app.command("delete")
    def delete_command(
        name: Annotated[str, typer.Argument(help="Template name.")],
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
        store: StoreOption = None,
    ) -> None:
        """Delete a template and all its versions."""
        opened = _store(store)
        opened.get(name)  # a clear NotFoundError before asking
        if not yes:
            typer.confirm(f"Delete template {name!r} and all its versions?", abort=True)
        opened.delete(name)
        console.print(f"Deleted template {name}.")

    @templates_app.command("export")
    def export_command(
        name: Annotated[str, typer.Argument(help="Template name.")],
        format: Annotated[
            str,
            typer.Option(
                "--format",
                "-f",
                help="kindling, or a legacy format: warm_sessions or session-templates (exactly their keys).",
            ),
        ] = "kindling",
        output: Annotated[
            Path | None,
            typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout."),
        ] = None,
        version: Annotated[int | None, typer.Option("--version", "-v", help="An earlier version.")] = None,
        store: StoreOption = None,
    ) -> None:
        """Export a template as JSON, in kindling's format or one of the two legacy formats."""
        from kindling.fileio import write_atomic
        from kindling.templates.model import export_template

        data = export_template(_store(store).get(name, version), format)
        payload = orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n"
        if output is None:
            sys.stdout.write(payload.decode("utf-8"))
            return
        write_atomic(output, payload)
        err_console.print(f"Wrote {output}.", markup=False, highlight=False)

    @templates_app.command("import")
    def import_command(
        files: Annotated[
            list[Path], typer.Argument(help="Template JSON files (kindling or either legacy format).")
        ],
        name: Annotated[
            str | None, typer.Option("--name", help="Store under this name (only with one file).")
        ] = None,
        store: StoreOption = None,
        json_output: JsonOption = False,
    ) -> None:
        """Import template files into the store; a bad file is reported and the others still import."""
        from kindling.errors import ConfigError, KindlingError
        from kindling.templates.store import read_template_file

        if name and len(files) != 1:
            raise ConfigError("--name works with exactly one file.")
        opened = _store(store)
        imported: list[dict[str, Any]] = []
        failed: list[dict[str, str]] = []
        for path in files:
            try:
                saved = opened.save(read_template_file(path, name=name or None))
                imported.append({"file": str(path), "name": saved.name, "version": saved.version})
            except KindlingError as exc:
                failed.append({"file": str(path), "error": str(exc)})
        _warn_problems(opened)  # a corrupt template file an import replaced (a copy is kept)
        if json_output:
            print_json({"imported": imported, "failed": failed})
        else:
            for row in imported:
                console.print(f"Imported {row['file']} as {row['name']} v{row['version']}.")
            for row in failed:
                err_console.print(f"Skipped {row['file']}: {row['error']}", markup=False, highlight=False)
        if failed:
            raise typer.Exit(1)

    @templates_app.command("path")
    def path_command(store: StoreOption = None, json_output: JsonOption = False) -> None:
        """Print where templates are stored."""
        from kindling.templates.store import store_info

        info = store_info(_store(store))
        if json_output:
            print_json(info)
        else:
            typer.echo(info["location"])

    @app.command("warm")
    def warm_command(
        name: Annotated[str | None, typer.Argument(help="Template name (or use --auto).")] = None,
        task: Annotated[str, typer.Option("--task", help="The new session's task, in words.")] = "",
        auto: AutoOption = False,
        budget: BudgetOption = 2000,
        style: StyleOption = "triples",
        format: FormatOption = "openai",
        max_examples: MaxExamplesOption = 8,
        no_system: Annotated[
            bool, typer.Option("--no-system", help="Leave out the template's system prompt addendum.")
        ] = False,
        record: RecordOption = True,
        store: StoreOption = None,
        prefill_file: Annotated[
            Path | None,
            typer.Option(
                "--prefill-file",
                help="Also write the messages as a Hermes prefill file (a JSON array; set "
                "prefill_messages_file in Hermes's config.yaml to it).",
            ),
        ] = None,
        tools: ToolsOption = None,
        lessons: LessonsOption = True,
        json_output: JsonOption = False,
    ) -> None:
        """Show the warm conversation for a task: the examples that fit it, within the token budget.

        Without NAME the template is chosen automatically (same as --auto) from the default
        tenant's own and shared templates.

        Examples:

            kindling warm coding --task "fix the failing parser test"

            kindling warm --auto --task "summarise recent papers on BM25" --budget 800 --json

            kindling warm --auto --task "fix the parser" --prefill-file ~/.hermes/prefill.json
        """
        from kindling.errors import ConversationError
        from kindling.warmup.warm import warm

        if prefill_file is not None and format != "openai":
            raise ConversationError("--prefill-file writes OpenAI-format messages (Hermes's); drop --format.")

        chosen = _pick_name(name, auto)
        opened = _warm_store(_store(store), chosen)
        result = warm(
            chosen,
            task,
            store=opened,
            budget=budget,
            style=style,
            include_system=not no_system,
            max_examples=max_examples,
            record_use=record,
            tools=_tools(tools),
            lessons=lessons,
        )
        _warn_problems(opened)  # templates --auto could not consider
        data = result.as_dict(format)
        from kindling.templates.provenance import provenance_of_calls

        # Where each example shown came from: source, session, tenant, verified or not.
        data["provenance"] = provenance_of_calls(result.template, result.messages)
        if prefill_file is not None:
            from kindling.integrations.hermes import write_prefill

            written = write_prefill(prefill_file, result.messages)
            err_console.print(
                f"Wrote {len(result.messages)} messages to {written}; point Hermes at it with "
                f"prefill_messages_file: {written} in its config.yaml.",
                markup=False,
            )
        if json_output:
            print_json(data)
            return
        console.print(
            f"Template {result.template.name} v{result.template.version} "
            f"({data['why']['template']}): "
            f"{sum(len(m.get('tool_calls') or ()) for m in result.messages)} examples "
            f"({', '.join(result.tools) or 'none fit'}), ~{result.estimated_tokens}/{budget} tokens.",
            markup=False,
            highlight=False,
        )
        if result.general:
            console.print(
                f"General examples, not matched to the task: {result.reason}.", markup=False, highlight=False
            )
        else:
            console.print(f"Tools: {result.reason}.", markup=False, highlight=False)
        if result.lessons:
            shown = "; ".join(f"{x['tool']}: {x['error_class']} ({x['sessions']})" for x in result.lessons)
            console.print(f"Lessons (past sessions): {shown}.", markup=False, highlight=False)
        for past in result.past_tasks:
            label = f" task {past['task_id']}" if past.get("task_id") is not None else ""
            console.print(
                f"  from past{label} {past['session_id']} (similarity {past['similarity']:.2f}): "
                f"{past['request']}",
                markup=False,
                highlight=False,
            )
        console.print()
        _print_messages(data["messages"], system=data.get("system", ""))

    @app.command("inject")
    def inject_command(
        name: Annotated[str | None, typer.Argument(help="Template name (or use --auto).")] = None,
        auto: AutoOption = False,
        task: Annotated[
            str | None,
            typer.Option("--task", help="The task. Default: the conversation's first user message."),
        ] = None,
        budget: BudgetOption = 2000,
        style: StyleOption = "triples",
        format: FormatOption = "openai",
        max_examples: MaxExamplesOption = 8,
        tools: ToolsOption = None,
        lessons: LessonsOption = True,
        record: RecordOption = True,
        store: StoreOption = None,
    ) -> None:
        """Read an OpenAI-format conversation (JSON list, or {"messages": [...]}) on stdin and print it
        with warm messages inserted after its leading system messages. Given a full chat-completions
        request body, its "tools" array limits the tools shown (--tools overrides).

        Example:

            kindling inject --auto < conversation.json > warmed.json
        """
        from kindling.errors import ConversationError
        from kindling.warmup.convert import to_anthropic
        from kindling.warmup.warm import inject_warm, tool_names

        if sys.stdin.isatty():
            # Waiting on a terminal looks like a hang; the conversation is meant to be piped in.
            raise ConversationError(
                "kindling inject reads the conversation on stdin: kindling inject --auto < conversation.json"
            )
        raw = sys.stdin.read()
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ConversationError(f"The conversation on stdin is not valid JSON: {exc}.") from exc
        wrapped = isinstance(data, dict)
        messages = data.get("messages") if isinstance(data, dict) else data
        if not isinstance(messages, list):
            raise ConversationError('Expected a JSON list of messages or an object with "messages".')
        allowed = _tools(tools)
        if allowed is None and isinstance(data, dict) and data.get("tools") is not None:
            allowed = tool_names(data["tools"])
        chosen = _pick_name(name, auto)
        opened = _warm_store(_store(store), chosen)
        merged, _result = inject_warm(
            messages,
            chosen,
            task=task,
            store=opened,
            budget=budget,
            style=style,
            max_examples=max_examples,
            record_use=record,
            tools=allowed,
            lessons=lessons,
        )
        _warn_problems(opened)
        output: Any
        if format == "anthropic":
            output = to_anthropic(merged)
        elif format == "openai":
            output = {**data, "messages": merged} if wrapped else merged
        else:
            raise ConversationError(f"Unknown message format {format!r}; use openai or anthropic.")
        print_json(output)
