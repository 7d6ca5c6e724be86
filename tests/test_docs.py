"""The docs cannot drift: every `kindling ...` command in README.md and docs/ parses against the real CLI,
every relative link resolves, and no page tells how the project was developed.

Commands are read from shell code blocks and from inline code, checked against the Click objects Typer builds
(the command exists, its options exist and take what they are given, no argument is left over), never run.
Usage notation is understood: `[optional]` parts are checked too, `a|b` checks each alternative, `...` and
placeholders in capitals (`NAME`, `SOURCE...`, `FILE.png`) stand for any value, and a reference that leaves out
a required argument (`kindling build`) is fine.
"""

from __future__ import annotations

import functools
import itertools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main

from kindling.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console", "zsh", "text"}
SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", "&>", "|&"}
# A value that stands for any value: NAME, SOURCE..., FILE.png, N:HASH, <token>, ..., $VAR, $(...).
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_]*(?:[.:/][\w.]*)?(?:\.\.\.)?|.*\.\.\..*|.*….*|<[^>]*>|\$.*)$")
HELP_FLAGS = {"--help", "-h", "--version", "-V", "--install-completion", "--show-completion"}
# Words joined by "/" that name alternatives rather than a path: subcommands or option spellings.
ALTERNATIVES = re.compile(r"^(?:[a-z][a-z-]*(?:/[a-z][a-z-]*)+|--?[\w-]+(?:/--?[\w-]+)+)$")


@dataclass(frozen=True)
class Command:
    """One `kindling ...` command line found in a page."""

    page: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: {self.text}"


# -- finding the commands ------------------------------------------------------------------------------------


def _fenced_blocks(text: str) -> Iterator[tuple[str, int, list[str]]]:
    """Yield (language, first line number, lines) for every fenced code block."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)", lines[index])
        if not opening:
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2).lower()
        start = index + 1
        index = start
        while index < len(lines) and not lines[index].strip().startswith(fence):
            index += 1
        yield language, start + 1, lines[start:index]
        index += 1


def _prose(text: str) -> str:
    """The text with fenced code blocks blanked out (line numbers kept)."""
    out = text.splitlines()
    for _, first, block in _fenced_blocks(text):
        for offset in range(-1, len(block) + 1):
            if 0 <= first - 1 + offset < len(out):
                out[first - 1 + offset] = ""
    return "\n".join(out)


def _segments(line: str) -> Iterator[str]:
    """Yield the simple commands of a shell line: split at pipes, lists and redirections, `$(...)` opened up."""
    for inner in re.findall(r"\$\(([^()]*)\)", line):
        yield from _segments(inner)
    line = re.sub(r"\$\([^()]*\)", "$SUBST", line)
    lexer = shlex.shlex(line, posix=False, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    for word in lexer:
        if word.startswith("#"):
            break
        if word in SHELL_OPERATORS or re.match(r"^\d?[<>]", word):
            if words:
                yield " ".join(words)
            words = []
            if word in {">", ">>", "<", "2>", "&>"} or re.match(r"^\d?[<>]", word):
                words = ["#redirect"]  # the file name that follows is not a command
            continue
        if words == ["#redirect"]:
            words = []
            continue
        words.append(word)
    if words and words != ["#redirect"]:
        yield " ".join(words)


def _kindling_command(segment: str) -> str | None:
    """Return the segment from `kindling` on when it runs kindling, else None."""
    words = segment.split()
    while words and (
        re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in {"$", "sudo", "exec", "time"}
    ):
        words.pop(0)
    if words[:3] in (["python", "-m", "kindling"], ["python3", "-m", "kindling"]):
        words = ["kindling", *words[3:]]
    if not words or not (words[0] == "kindling" or words[0].endswith("/kindling")):
        return None
    return " ".join(["kindling", *words[1:]])


def find_commands(page: Path) -> list[Command]:
    """Every `kindling ...` command in a page's shell code blocks and inline code."""
    text = page.read_text(encoding="utf-8")
    found: list[Command] = []
    for language, first, block in _fenced_blocks(text):
        if language not in SHELL_LANGUAGES:
            continue
        prompted = any(line.lstrip().startswith("$ ") for line in block)
        joined: list[tuple[int, str]] = []
        pending = ""
        for number, line in enumerate(block, first):
            if prompted and not pending:
                if not line.lstrip().startswith("$ "):
                    continue
                line = line.lstrip()[2:]
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            joined.append((number, pending + line))
            pending = ""
        for number, line in joined:
            for segment in _segments(line):
                command = _kindling_command(segment)
                if command:
                    found.append(Command(page, number, command))
    prose = _prose(text)
    for match in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", prose, re.S):
        span = " ".join(match.group(2).replace("\\|", "|").split())
        if not re.match(r"^(\$ )?kindling\s", span + " ") or span.strip() == "kindling":
            continue
        number = prose.count("\n", 0, match.start()) + 1
        for segment in _segments(span.removeprefix("$ ")):
            command = _kindling_command(segment)
            if command:
                found.append(Command(page, number, command))
    return found


# -- checking one against the CLI ----------------------------------------------------------------------------


def _words(text: str) -> list[list[str]]:
    """Split a command into words and expand usage notation: one word list per combination of alternatives."""
    lexer = shlex.shlex(text, posix=False)
    lexer.whitespace_split = True
    lexer.commenters = ""
    choices: list[list[str]] = []
    for raw in lexer:
        quoted = raw[:1] in {"'", '"'}
        word = raw if quoted else raw.strip("[]{}")
        if not word or word == "...":
            continue
        unquoted = shlex.split(word)[0] if quoted else word
        if not quoted and "|" in word and not PLACEHOLDER.match(word):
            choices.append([part for part in word.split("|") if part])
        elif not quoted and ALTERNATIVES.match(word):  # pending/approve/deny, --base-url/--model, --tag/-t
            choices.append(word.split("/"))
        else:
            choices.append([unquoted])
    return [list(combination) for combination in itertools.product(*choices)]


def _value_is_placeholder(value: Any) -> bool:
    values = value if isinstance(value, (list, tuple)) else [value]
    return any(isinstance(v, str) and PLACEHOLDER.match(v) for v in values)


def _check_params(command: Any, ctx: Any, words: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Parse ``words`` for ``command``'s own parameters; return its options and what is left.

    Raises the CLI's usage error for an unknown option, an option without its value, or a value of
    the wrong type (unless the value is a placeholder).
    """
    parser = command.make_parser(ctx)
    opts, rest, _ = parser.parse_args(args=list(words))
    for param in command.get_params(ctx):
        if param.is_eager:  # --help, --version, completion: their callbacks act, they check nothing
            continue
        value = opts.get(param.name)
        if value is None or value in ((), []) or _value_is_placeholder(value):
            continue
        param.process_value(ctx, value)
    return opts, rest


@functools.cache
def _cli() -> Any:
    """The Click command tree Typer builds for ``kindling`` (built once: it takes a while)."""
    return typer.main.get_command(app)


def _walk(root: Any, words: list[str]) -> list[str]:
    """Follow ``words`` down the command tree, checking each level's parameters; return the command path.

    Raises LookupError for an unknown command or a word left over, and the CLI's usage errors.
    """
    command, path = root, ["kindling"]
    ctx = command.context_class(command, info_name="kindling")
    while hasattr(command, "commands"):
        _, rest = _check_params(command, ctx, words)
        if not rest:
            return path
        name, words = rest[0], rest[1:]
        sub = command.get_command(ctx, name)
        if sub is None:
            raise LookupError(f"'{' '.join(path)}' has no command {name!r}")
        path.append(name)
        command = sub
        ctx = command.context_class(command, info_name=name, parent=ctx)
    _, rest = _check_params(command, ctx, words)
    if rest and not ctx.allow_extra_args:
        raise LookupError(f"'{' '.join(path)}' takes no further argument: {' '.join(rest)!r}")
    return path


def check_command(text: str) -> list[str]:
    """Return the problems of one documented command line (empty when it parses)."""
    root = _cli()
    problems: list[str] = []
    for words in _words(text):
        words = [w for w in words[1:] if w not in HELP_FLAGS]
        try:
            try:
                _walk(root, words)
            except Exception as exc:
                # `kindling stats --plot` names an option that takes a value: a reference, not a call.
                if type(exc).__name__ != "BadOptionUsage" or not words or not words[-1].startswith("-"):
                    raise
                _walk(root, [*words, "VALUE"])
        except LookupError as exc:
            problems.append(str(exc))
        except Exception as exc:  # the CLI's own usage errors (typer vendors its Click)
            if type(exc).__name__ == "MissingParameter":
                continue  # a reference to the command, not a whole call
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            context = getattr(exc, "ctx", None)
            where = context.command_path if context is not None else "kindling"
            problems.append(f"'{where}': {' '.join(str(message).split())}")
    return problems


# -- the checks ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def commands() -> list[Command]:
    return [command for page in PAGES for command in find_commands(page)]


def test_the_docs_hold_commands_to_check(commands: list[Command]) -> None:
    assert len(commands) >= 100, len(commands)
    assert {c.page.name for c in commands} >= {"README.md", "templates.md", "confirm.md", "mcp.md"}


def test_every_documented_command_parses(commands: list[Command]) -> None:
    problems = [f"{c.where()}\n    {p}" for c in commands for p in check_command(c.text)]
    assert not problems, "documented commands the CLI refuses:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "text",
    [
        "kindling confirm token create agent NAME",  # the options are --role and --name
        "kindling templatez list",
        "kindling build main --no-such-option",
        "kindling warm --auto --budget lots",
        "kindling confirm audit list --limit many",
    ],
)
def test_the_check_refuses_what_the_cli_refuses(text: str) -> None:
    assert check_command(text), text


@pytest.mark.parametrize(
    "text",
    [
        "kindling build",
        "kindling confirm token create --role agent --name ci-bot",
        "kindling stats [SOURCE...] [--format F] [--json] [--plot FILE.png] [--by-tool] [--top N]",
        "kindling cron add|edit|list|tick|daemon ...",
        "kindling warm --style triples|closed --budget N --task '...'",
        "kindling confirm audit verify --expect-head N:HASH --json",
        "kindling --version",
        "kindling templates --help",
    ],
)
def test_the_check_accepts_usage_notation(text: str) -> None:
    assert check_command(text) == [], check_command(text)


def test_commands_are_found_in_blocks_and_inline_code(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Run `kindling sessions SOURCE...`, then\n`kindling confirm\napprove ID`.\n\n"
        "```console\n$ kindling stats x.db --json | jq .cohorts\n"
        "kindling output line, not a command\n$ KINDLING_HOME=/tmp/k kindling build main \\\n"
        '    x.db --tag main\n$ kindling sessions "$(kindling proxy path)" > out.txt  # a comment\n```\n\n'
        "```python\nsubprocess.run(['kindling', 'nothing'])\n```\n",
        encoding="utf-8",
    )
    texts = [c.text for c in find_commands(page)]
    assert texts == [
        "kindling stats x.db --json",
        "kindling build main x.db --tag main",
        "kindling proxy path",
        'kindling sessions "$SUBST"',
        "kindling sessions SOURCE...",
        "kindling confirm approve ID",
    ]


# -- links ---------------------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lower case, punctuation removed, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page offers on GitHub: its headings (duplicates numbered) and explicit ids."""
    text = _prose(page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set(re.findall(r"""\bid=["']([^"']+)["']""", text)) | set(re.findall(r"\{#([\w-]+)\}", text))
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M):
        slug = _slug(re.sub(r"\s*\{#[\w-]+\}\s*$", "", heading))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(page: Path) -> Iterator[tuple[int, str]]:
    """(line, target) of every relative link and image in a page's prose."""
    prose = _prose(page.read_text(encoding="utf-8"))
    prose = re.sub(r"(`+)(?!`).+?(?<!`)\1", lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose, flags=re.S)
    pattern = (
        r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^\s*\[[^\]]+\]:\s*(\S+)|\bhref=\"([^\"]+)\""
    )
    for match in re.finditer(pattern, prose, re.M):
        target = next(group for group in match.groups() if group)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto: ...
        yield prose.count("\n", 0, match.start()) + 1, target


def test_every_relative_link_resolves() -> None:
    broken = []
    checked = 0
    for page in PAGES:
        for line, target in links(page):
            checked += 1
            path_part, _, anchor = target.partition("#")
            resolved = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}:{line}: {target}"
            if not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where} (no heading with that anchor in {resolved.name})")
    assert checked >= 50, checked
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_check_sees_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Speed, and what it gives\n## `kindling build NAME`\n", encoding="utf-8")
    assert anchors(tmp_path / "a.md") == {"speed-and-what-it-gives", "kindling-build-name"}
    page = tmp_path / "b.md"
    page.write_text("[x](a.md#speed) and [y](a.md#kindling-build-name) `[z](nowhere.md)`\n", encoding="utf-8")
    assert list(links(page)) == [(1, "a.md#speed"), (1, "a.md#kindling-build-name")]


# -- what the pages say --------------------------------------------------------------------------------------

# How the project was developed belongs in git log, not in what a user reads.
HISTORY = re.compile(
    r"\bsession [0-9]+('s)?\b|\bthe lead\b|\bengineers' work\b|\b(in|from|since) issue [0-9]+\b"
    r"|\bissue [0-9]+\b|\b(tried|measured)( [a-z]+)? and not kept\b|\b(this|that|the last|the next|a later) round\b"
    r"|\bcommit [0-9a-f]{7,40}\b|\((?:at )?(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}\)"
    r"|\bother (helpers|engineers)\b",
    re.I,
)


def test_no_page_tells_how_the_project_was_developed() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
        for page in PAGES
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not found, "development history in the docs (describe the product as it is):\n" + "\n".join(found)


def test_the_readme_is_a_first_read() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: figures and reference belong in docs/"
    assert any("make install" in line for line in lines[:10]), "the README's first lines say how to install"


def test_every_figure_the_readme_cites_is_in_the_benchmarks() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    figures = set(re.findall(r"\b\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?x\b|\b0\.\d{3}\b|\b\d+(?:\.\d+)?%", readme))
    assert figures, "the README cites no figure"
    missing = sorted(f for f in figures if f not in benchmarks)
    assert not missing, f"figures in the README that docs/benchmarks.md does not hold: {missing}"


def test_every_page_is_in_the_site_nav() -> None:
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(entry: Any) -> Iterator[str]:
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, list):
            for item in entry:
                yield from pages(item)
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from pages(value)

    listed = set(pages(nav))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk == listed, (
        f"not in mkdocs.yml's nav: {sorted(on_disk - listed)}; missing: {sorted(listed - on_disk)}"
    )


def test_every_install_line_names_the_distribution() -> None:
    """`kindling` on the package index is another project: installs name `kindling-agent`, extras included."""
    wrong = re.compile(r"""(?:pip|pipx|uv pip|uv tool) install (?:-\S+ )*['"]?kindling(?![\w-])""")
    extra = re.compile(r"""['"`\s]kindling\[[a-z,]+\]""")
    files = [
        *PAGES,
        *sorted((ROOT / "src").rglob("*.py")),
        ROOT / "Makefile",
        *sorted((ROOT / "scripts").iterdir()),
    ]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if wrong.search(line) or extra.search(line)
    ]
    assert not found, "install lines naming the wrong distribution (use kindling-agent):\n" + "\n".join(found)
