"""kindling's own detector of shell commands that need a human, for where Hermes's is not at hand.

Inside Hermes the approval hook asks Hermes's ``detect_dangerous_command`` (see
``kindling.integrations.hermes_approval``); anywhere else (another agent, an old Hermes) it asks
:func:`dangerous_command`. A command is dangerous when it destroys data, hands the machine over,
or cannot be taken back: recursive deletes however they are spelled (``rm -r -f``,
``rm --recursive --force``, ``find … -delete``, ``xargs rm``), scripts fetched from the network and
run (``curl … | sh``, ``bash <(curl …)``, ``eval "$(wget …)"``), decoded text run as commands
(``base64 -d | sh``), deletes inside interpreter one-liners (``python -c "shutil.rmtree(…)"``),
writes over disks and files (``dd of=…``, ``mkfs``, ``shred``), history rewrites, mass kills,
shutdowns, SQL that drops or empties tables, and cloud resources deleted.

The command is split with :mod:`shlex` into simple commands at ``;``, ``&&``, ``||``, ``|``,
``$(`` and the like, so each program's own arguments are judged (``grep "rm -rf" notes.md`` is
only a search), and ``sh -c``/``bash -c`` strings and code passed to ``python -c`` are judged too.
What only shows across a pipeline or a redirection (a download piped to a shell, a write to a
block device) is matched on the whole text.
"""

from __future__ import annotations

import os
import re
import shlex
import unicodedata
from collections.abc import Callable, Iterator

__all__ = ["dangerous_command"]

_SHELL_NAMES = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "ash", "csh", "tcsh"})
_SHELL = r"(?:ba|z|da|k|c|tc|fi)?sh"
_RUNNER = rf"(?:{_SHELL}|python[\d.]*|perl|ruby|node|php)"
# A pipe into a program that runs what it reads: "| sh", "| sudo bash -s", "| /usr/bin/env python3".
_INTO_RUNNER = rf"\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:(?:/usr)?/bin/)?(?:env\s+)?(?:[\w./-]*/)?{_RUNNER}\b"
_BLOCK_DEVICE = r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk|md\d|dm-|mapper/|loop)"

# What shows only across a pipeline, a substitution or a redirection, matched on the whole text.
_TEXT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), description)
    for pattern, description in (
        (rf"\b(?:curl|wget|fetch|aria2c)\b[^\n;&]*{_INTO_RUNNER}", "runs a script from the network"),
        # bash <(curl …), source <(wget …), eval "$(curl …)", . <(curl …)
        (
            rf"(?:\b(?:{_RUNNER}|source|eval)\b(?:\s+-\S+)*|(?:^|[;&|(])\s*\.)\s*<?\s*[\"']?(?:<\(|\$\(|`)\s*"
            r"(?:curl|wget|fetch)\b",
            "runs a script from the network",
        ),
        (
            rf"\b(?:base64|base32|base16|basenc)\b[^|\n]*\s(?:-[a-z]*d\b|--decode\b)[^|\n]*{_INTO_RUNNER}",
            "runs decoded, hidden commands",
        ),
        (rf"\bxxd\b[^|\n]*\s-r\b[^|\n]*{_INTO_RUNNER}", "runs decoded, hidden commands"),
        (rf"\bopenssl\b[^|\n]*\s-d\b[^|\n]*{_INTO_RUNNER}", "runs decoded, hidden commands"),
        (rf"\becho\b[^|\n]*\|\s*\btr\b[^|\n]*{_INTO_RUNNER}", "runs decoded, hidden commands"),
        (rf"(?:>|\bof=)\s*[\"']?{_BLOCK_DEVICE}", "overwrites a disk"),
        (
            r"(?:>>?|\btee\b(?:\s+-\S+)*)\s*[\"']?(?:/etc/|/boot/|/usr/|/bin/|/sbin/|/lib|"
            r"(?:~|\$HOME|\$\{HOME\})/\.(?:ssh/|bashrc|zshrc|profile|bash_profile|aws/|kube/|gnupg/))",
            "overwrites a system, login or credential file",
        ),
        (r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:", "fork bomb"),
    )
)
# Statements that destroy data, where a database client (or the statement itself) is the command;
# a search for the words (grep "DROP TABLE") is not.
_SQL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), description)
    for pattern, description in (
        (r"\b(?:drop|truncate)\s+(?:table|database|schema|keyspace)\b", "destroys database tables"),
        (r"\bdelete\s+from\s+[\w.\"`\[\]]+\s*(?:;|[\"']|\)|$)", "deletes every row of a table"),
        (r"\bflushall\b|\bflushdb\b", "empties a database"),
    )
)
_SQL_COMMAND = re.compile(
    r"\b(?:psql|mysql|mariadb|sqlite3?|sqlcmd|duckdb|clickhouse(?:-client)?|cockroach|snowsql|bq|cqlsh"
    r"|redis-cli|valkey-cli|mongo(?:sh)?)\b|^\s*(?:drop|truncate|delete|flush)",
    re.IGNORECASE,
)

# Code handed to an interpreter on the command line (python -c, perl -e, node -e, ruby -e).
_CODE_DELETES = re.compile(
    r"\brmtree\b|\bos\s*\.\s*(?:remove|unlink|rmdir|removedirs)\s*\(|\.\s*(?:unlink|rmdir)\s*\("
    r"|\bFileUtils\s*\.\s*(?:rm|remove)|\b(?:rmSync|rmdirSync|unlinkSync)\s*\(|\bfs\s*\.\s*(?:rm|unlink|rmdir)\s*\("
    r"|(?:^|[;{\s])unlink\b|\bremove_tree\b|\bdel_tree\b|\btruncate\s*\(",
)
_CODE_STRING = re.compile(r"\"((?:[^\"\\\n]|\\.){2,})\"|'((?:[^'\\\n]|\\.){2,})'")
_HEREDOC_CODE = re.compile(r"\b(?:python[\d.]*|perl|ruby|node)\b[^\n]*<<", re.IGNORECASE)

_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac", "!", "time"}
)
# Programs that run the rest of their arguments as a command.
_WRAPPERS = frozenset(
    {
        "env",
        "nohup",
        "nice",
        "ionice",
        "stdbuf",
        "exec",
        "command",
        "builtin",
        "setsid",
        "chroot",
        "caffeinate",
    }
)
_AS_ROOT = frozenset({"sudo", "doas", "pkexec", "run0"})
_DELETERS = frozenset({"rm", "unlink", "rmdir", "shred", "srm", "wipe"})
_DISK_TOOLS = frozenset(
    {
        "mkfs",
        "mke2fs",
        "mkswap",
        "wipefs",
        "fdisk",
        "sfdisk",
        "cfdisk",
        "parted",
        "sgdisk",
        "gdisk",
        "blkdiscard",
    }
)
_STOPPERS = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_INTERPRETER_FLAGS = {"perl": ("-e", "-E"), "ruby": ("-e",), "node": ("-e", "--eval", "-p"), "php": ("-r",)}
_MAX_DEPTH = 3


def dangerous_command(command: str) -> str | None:
    """Return why ``command`` needs a human (a few words), or None when it may run unasked."""
    return _judge(_normalize(command), 0)


def _normalize(command: str) -> str:
    # Full-width and compatibility characters read as their ASCII twins; line continuations join.
    text = unicodedata.normalize("NFKC", command)
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    return text.replace("\\\r\n", " ").replace("\\\n", " ")


def _judge(text: str, depth: int) -> str | None:
    if depth > _MAX_DEPTH or not text.strip():
        return None
    for pattern, description in _TEXT_PATTERNS:
        if pattern.search(text):
            return description
    if _SQL_COMMAND.search(text):
        for pattern, description in _SQL_PATTERNS:
            if pattern.search(text):
                return description
    if _HEREDOC_CODE.search(text) and _CODE_DELETES.search(text):
        return "deletes files from inside a script"
    for words in _simple_commands(text):
        found = _judge_words(words, depth)
        if found:
            return found
        for word in words:  # "$(…)" or `…` inside a quoted word still runs
            inner = _SUBSTITUTION.search(word)
            if inner and (found := _judge(inner.group(1), depth + 1)):
                return found
    return None


_SUBSTITUTION = re.compile(r"(?:\$\(|`)(.+)", re.DOTALL)
_PUNCTUATION = frozenset(";&|()<>`")


def _simple_commands(text: str) -> Iterator[list[str]]:
    """Yield the words of each simple command in ``text`` (redirection targets left out)."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>`")
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: judge the words as they stand
        tokens = re.findall(r"[;&|()<>`]+|[^\s;&|()<>`]+", text)
    words: list[str] = []
    target = False
    for token in tokens:
        chars = set(token)
        if chars and chars <= _PUNCTUATION and chars & {"<", ">"} and not chars & {"(", ")"}:
            target = True  # a redirection: the next word is where it goes, not an argument
        elif token in ("{", "}") or (chars and chars <= _PUNCTUATION):
            if words:  # ; && || | & ( ) $( <( ` end one command and start the next
                yield words
            words, target = [], False
        elif target:
            target = False
        else:
            words.append(token)
    if words:
        yield words


def _judge_words(words: list[str], depth: int) -> str | None:
    words = list(words)
    while words:
        first = words[0]
        name = _program(first)
        if name in _KEYWORDS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", first):
            words = words[1:]
        elif name in _AS_ROOT:
            return "runs as root"
        elif name in _WRAPPERS:
            words = _after_options(words[1:], takes_value={"-u", "-n", "-c", "-C", "-i", "-o", "-e"})
        elif name in ("timeout", "watch"):
            rest = _after_options(words[1:], takes_value={"-s", "-k", "-n", "--signal", "--kill-after"})
            words = rest[1:] if name == "timeout" else rest
        elif name == "xargs":
            rest = _after_options(words[1:], takes_value={"-I", "-n", "-P", "-L", "-d", "-E", "-s", "-a"})
            if rest and _program(rest[0]) in _DELETERS:
                return "deletes every file it is given (xargs)"
            words = rest
        else:
            break
    if not words:
        return None
    name = _program(words[0])
    check = _PROGRAMS.get(name)
    if check is None and name.startswith("mkfs."):
        check = _PROGRAMS["mkfs"]
    if check is None and re.fullmatch(r"python[\d.]*", name):
        check = _python
    return check(words[1:], depth) if check is not None else None


def _program(word: str) -> str:
    return os.path.basename(word.lstrip("\\")).lower()


def _after_options(words: list[str], *, takes_value: set[str]) -> list[str]:
    index = 0
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in takes_value else 1
    return words[index:]


def _flags(args: list[str]) -> tuple[set[str], set[str]]:
    """Return the short flag letters and the long options (``--name``, value cut) in ``args``."""
    short: set[str] = set()
    long: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            long.add(arg.split("=", 1)[0])
        elif arg.startswith("-") and len(arg) > 1:
            short.update(arg[1:])
    return short, long


def _operands(args: list[str]) -> list[str]:
    seen_end = False
    found = []
    for arg in args:
        if not seen_end and arg == "--":
            seen_end = True
        elif seen_end or not arg.startswith("-"):
            found.append(arg)
    return found


def _rm(args: list[str], _depth: int) -> str | None:
    short, long = _flags(args)
    if "r" in short or "R" in short or "--recursive" in long:
        return "recursive delete"
    if "--no-preserve-root" in long:
        return "deletes the root of the file system"
    for operand in _operands(args):
        if operand.startswith(("/", "~", "$HOME", "${HOME}")) or operand in ("*", ".", "..", ".*"):
            return "deletes outside the working directory"
    return None


def _deleter(args: list[str], _depth: int) -> str | None:
    return "destroys a file's contents" if _operands(args) else None


def _find(args: list[str], depth: int) -> str | None:
    for index, arg in enumerate(args):
        if arg == "-delete":
            return "deletes every file it finds (find -delete)"
        if arg in ("-exec", "-execdir", "-ok", "-okdir") and index + 1 < len(args):
            inner = args[index + 1 :]
            if _program(inner[0]) in _DELETERS or _judge_words(inner, depth + 1):
                return "runs a destructive command on every file it finds"
    return None


def _dd(args: list[str], _depth: int) -> str | None:
    return "overwrites a file or disk (dd of=)" if any(a.startswith("of=") for a in args) else None


def _disk(args: list[str], _depth: int) -> str | None:
    if set(args) & {"-l", "--list", "-h", "--help", "-V", "--version", "print"}:
        return None  # lists partitions or prints help
    return "formats or wipes a disk"


def _chmod(args: list[str], _depth: int) -> str | None:
    # "-w" or "-x" is a mode (take a permission away), not an option.
    short, long = _flags([a for a in args if not re.fullmatch(r"-[rwxXst]+", a)])
    if "R" in short or "--recursive" in long:
        return "changes permissions recursively"
    if any(_WORLD_WRITABLE.fullmatch(a) for a in args):
        return "makes files writable by everyone"
    return None


# An octal mode whose last digit lets others write (777, 0666, 1777), or a+w / o+w.
_WORLD_WRITABLE = re.compile(r"[0-7]{0,2}[0-7][2367]|[ug]*[ao][ugo]*[+=][rwxXst]*w[rwxXst]*")


def _chown(args: list[str], _depth: int) -> str | None:
    short, long = _flags(args)
    return "changes ownership recursively" if "R" in short or "--recursive" in long else None


def _git(args: list[str], _depth: int) -> str | None:
    rest = args
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] in ("-C", "-c", "--git-dir", "--work-tree") else rest[1:]
    if not rest:
        return None
    sub, options = rest[0], rest[1:]
    short, long = _flags(options)
    if sub == "push" and (
        "f" in short
        or long & {"--force", "--force-with-lease", "--mirror", "--delete", "--prune"}
        or any(o.startswith("+") or (o.startswith(":") and len(o) > 1) for o in options)
    ):
        return "rewrites or deletes remote history"
    if sub == "reset" and "--hard" in long:
        return "discards uncommitted work (git reset --hard)"
    if sub == "clean" and ("f" in short or "--force" in long) and not ("n" in short or "--dry-run" in long):
        return "deletes untracked files (git clean)"
    if sub == "branch" and ("D" in short or ("d" in short and "f" in short)):
        return "deletes a branch"
    if sub in ("filter-branch", "filter-repo") or (sub == "stash" and options[:1] == ["clear"]):
        return "rewrites or discards history"
    if sub in ("checkout", "restore") and "." in options:
        return "discards uncommitted work"
    return None


def _stopper(_args: list[str], _depth: int) -> str | None:
    return "stops the machine"


def _init(args: list[str], _depth: int) -> str | None:
    return "stops the machine" if args[:1] in (["0"], ["6"]) else None


def _systemctl(args: list[str], _depth: int) -> str | None:
    verbs = {"stop", "disable", "mask", "kill", "poweroff", "reboot", "halt", "isolate", "restart"}
    return "stops or disables a service" if set(_operands(args)) & verbs else None


def _service(args: list[str], _depth: int) -> str | None:
    return "stops a service" if set(args[1:2]) & {"stop", "restart"} else None


def _kill(args: list[str], _depth: int) -> str | None:
    return "kills every process" if "-1" in args or "-- -1" in " ".join(args) else None


def _mass_kill(_args: list[str], _depth: int) -> str | None:
    return "kills processes by name"


def _crontab(args: list[str], _depth: int) -> str | None:
    short, _long = _flags(args)
    return "removes every scheduled job" if "r" in short else None


def _mv(args: list[str], _depth: int) -> str | None:
    operands = _operands(args)
    return "destroys a file (moved to /dev/null)" if operands and operands[-1] == "/dev/null" else None


def _rsync(args: list[str], _depth: int) -> str | None:
    _short, long = _flags(args)
    return "deletes files at the destination" if any(o.startswith("--delete") for o in long) else None


def _truncate(args: list[str], _depth: int) -> str | None:
    joined = " ".join(args)
    return "empties a file" if re.search(r"(?:^|\s)(?:-s\s*|--size[= ])0(?:\s|$)", joined) else None


def _shell(args: list[str], depth: int) -> str | None:
    for index, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:] and index + 1 < len(args):
            return _judge(args[index + 1], depth + 1)
    return None


def _python(args: list[str], depth: int) -> str | None:
    for index, arg in enumerate(args):
        if arg == "-c" and index + 1 < len(args):
            return _code(args[index + 1], depth)
        if arg.startswith("-c") and len(arg) > 2:
            return _code(arg[2:], depth)
    return None


def _interpreter(flags: tuple[str, ...]) -> Callable[[list[str], int], str | None]:
    def check(args: list[str], depth: int) -> str | None:
        for index, arg in enumerate(args):
            if arg in flags and index + 1 < len(args):
                return _code(args[index + 1], depth)
        return None

    return check


def _code(code: str, depth: int) -> str | None:
    if _CODE_DELETES.search(code):
        return "deletes files from inside a script"
    # A command the code runs (os.system("…"), subprocess.run("…", shell=True), `…` in Perl).
    for match in _CODE_STRING.finditer(code):
        inner = match.group(1) or match.group(2) or ""
        if " " in inner and _judge(inner, depth + 1):
            return "runs a dangerous command from inside a script"
    return None


def _cloud(name: str) -> Callable[[list[str], int], str | None]:
    def check(args: list[str], _depth: int) -> str | None:
        words = [a for a in args if not a.startswith("-")]
        _short, long = _flags(args)
        if name == "terraform" and (words[:1] == ["destroy"] or "-destroy" in args):
            return "destroys cloud resources"
        if name in ("kubectl", "oc", "helm") and words[:1] and words[0] in ("delete", "uninstall", "drain"):
            return "deletes cluster resources"
        if name in ("docker", "podman"):
            if words[:1] in (["rm"], ["rmi"]) and ("-f" in args or "--force" in long):
                return "force-removes containers or images"
            if words[:2] in (["system", "prune"], ["volume", "prune"], ["volume", "rm"]) or words[:1] == [
                "kill"
            ]:
                return "deletes containers, volumes or data"
        if name == "aws" and (
            words[1:2] in (["rb"],)
            or (words[1:2] == ["rm"] and "--recursive" in long)
            or any(w.startswith(("delete-", "terminate-")) for w in words[1:2])
        ):
            return "deletes cloud resources"
        if name in ("gsutil", "gcloud", "az") and any(w in ("rm", "rb", "delete") for w in words[:4]):
            return "deletes cloud resources"
        return None

    return check


_PROGRAMS: dict[str, Callable[[list[str], int], str | None]] = {
    "rm": _rm,
    "unlink": _deleter,
    "shred": _deleter,
    "srm": _deleter,
    "wipe": _deleter,
    "find": _find,
    "dd": _dd,
    **dict.fromkeys(_DISK_TOOLS, _disk),
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "git": _git,
    **dict.fromkeys(_STOPPERS, _stopper),
    "init": _init,
    "telinit": _init,
    "systemctl": _systemctl,
    "service": _service,
    "kill": _kill,
    "killall": _mass_kill,
    "pkill": _mass_kill,
    "crontab": _crontab,
    "mv": _mv,
    "rsync": _rsync,
    "truncate": _truncate,
    **dict.fromkeys(_SHELL_NAMES, _shell),
    **{name: _interpreter(flags) for name, flags in _INTERPRETER_FLAGS.items()},
    **{
        name: _cloud(name)
        for name in (
            "terraform",
            "kubectl",
            "oc",
            "helm",
            "docker",
            "podman",
            "aws",
            "gsutil",
            "gcloud",
            "az",
        )
    },
}
