"""Mining rules as data: the defaults, and the user's extensions from ``$KINDLING_HOME/mining.json``.

Every rule that decides something in mining lives in a named table here, so a user can add to it
without touching code. The file is optional; when present it is validated with pydantic and a bad
file is a ``ConfigError`` naming the file and the field. ``KINDLING_MINING_CONFIG`` points at a
different file. Example::

    {
      "outcome_rules": [
        {"name": "http_5xx", "kind": "text", "pattern": "HTTP 5\\\\d\\\\d", "where": "anywhere"},
        {"name": "api_failed", "kind": "json", "field": "ok", "test": "equals", "value": false,
         "tools": ["api_*"]}
      ],
      "disabled_rules": ["no_such_file"],
      "tool_families": {"code": ["run_notebook"], "research": ["arxiv_*"]},
      "task_keywords": {"research": ["literature", "survey"]},
      "trivial_tools": ["todo"],
      "keep_tools": ["memory"],
      "skip_end_reasons": ["aborted"],
      "secret_patterns": ["corp-[0-9a-f]{32}"],
      "personal_keys": {"patient_id": "patient_id", "*_iban": "account_id"},
      "personal_patterns": {"patient_id": ["\\bPT-\\d{6}\\b"]}
    }

``"redact_secrets": false`` keeps credentials in examples as they were (only for data that never
leaves your machine). Personal data (the values of ``personal_keys`` fields, and what
``personal_patterns`` match) becomes typed placeholders in kept examples (``<user_id_1>``);
``"scrub_personal_data": false`` (or ``kindling build --keep-personal-data``) keeps it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kindling.config import kindling_home
from kindling.errors import ConfigError
from kindling.mining.scrub_patterns import (
    DEFAULT_PERSONAL_KEYS,
    DEFAULT_PERSONAL_PATTERNS,
    DEFAULT_SECRET_PATTERNS,
)

CONFIG_FILE_NAME = "mining.json"
CONFIG_ENV = "KINDLING_MINING_CONFIG"

_RULE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_PLACEHOLDER_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
FAMILIES = ("code", "file", "research", "terminal")


class OutcomeRule(BaseModel):
    """One named rule that can decide a tool call's outcome.

    ``kind="json"`` rules look at one top-level field of a result that is a JSON object:
    ``test`` is ``equals`` (field == value), ``in`` (field is one of value), ``nonempty`` (field is
    present and not null/false/0/empty) or ``nonzero`` (field is a number other than 0).
    ``kind="text"`` rules apply a regular expression to a result that is not a JSON object, at the
    ``start`` (after leading whitespace) or ``anywhere``. ``tools`` limits a rule to tool names
    (shell-style globs); empty means every tool. ``status`` is what the rule decides.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Literal["json", "text"]
    status: Literal["failed", "ok"] = "failed"
    field: str | None = None
    test: Literal["equals", "in", "nonempty", "nonzero"] | None = None
    value: Any = None
    pattern: str | None = None
    where: Literal["start", "anywhere"] = "anywhere"
    ignore_case: bool = False
    tools: tuple[str, ...] = ()

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _RULE_NAME.match(value):
            raise ValueError("a rule name is lower-case snake_case, 1-64 characters, starting with a letter")
        return value

    @model_validator(mode="after")
    def _check_kind(self) -> OutcomeRule:
        if self.kind == "json":
            if not self.field or self.test is None:
                raise ValueError(f"json rule {self.name!r} needs 'field' and 'test'")
            if self.test == "in" and not isinstance(self.value, list):
                raise ValueError(f"json rule {self.name!r} with test 'in' needs a list 'value'")
        else:
            if not self.pattern:
                raise ValueError(f"text rule {self.name!r} needs a 'pattern'")
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"text rule {self.name!r} has a bad pattern: {exc}") from None
        return self


def _json_rule(name: str, field: str, test: str, value: Any = None) -> OutcomeRule:
    return OutcomeRule.model_validate(
        {"name": name, "kind": "json", "field": field, "test": test, "value": value}
    )


def _text_rule(name: str, pattern: str, where: str = "anywhere") -> OutcomeRule:
    return OutcomeRule.model_validate({"name": name, "kind": "text", "pattern": pattern, "where": where})


# Order matters only for which name is reported when several rules would fire: first wins.
DEFAULT_OUTCOME_RULES: tuple[OutcomeRule, ...] = (
    _json_rule("json_success_false", "success", "equals", False),
    _json_rule("json_error", "error", "nonempty"),
    _json_rule("json_exit_code_nonzero", "exit_code", "nonzero"),
    _json_rule("json_status_error", "status", "in", ["error", "failed", "failure"]),
    _text_rule("error_prefix", r"Error\b|error:", where="start"),
    _text_rule("python_traceback", r"Traceback \(most recent call last\):"),
    _text_rule("command_not_found", r"command not found"),
    _text_rule("no_such_file", r"No such file or directory"),
    _text_rule("permission_denied", r"Permission denied"),
)

DEFAULT_TOOL_FAMILIES: dict[str, tuple[str, ...]] = {
    "code": ("execute_code", "code_execution"),
    "file": ("read_file", "write_file", "patch", "search_files"),
    "research": ("web_search", "web_extract", "web_fetch", "browser_*"),
    "terminal": ("terminal", "execute_terminal", "shell"),
}

DEFAULT_TRIVIAL_TOOLS: tuple[str, ...] = ("clarify", "memory", "fact_store", "fact_feedback")

# Scrubbing's tables (credentials, personal data, their hints and checks) live in
# kindling.mining.scrub_patterns; they are served here with the other defaults.

DEFAULT_SKIP_END_REASONS: tuple[str, ...] = ("error", "errored", "failed", "failure", "crashed", "exception")


# Keywords that say which tool family a free-text task will reach for. Each entry is one regular
# expression matched at a word start, case-insensitively; a stem without a trailing \b matches longer
# words too ("refactor" matches "refactoring"). One entry per tuple item: entries may hold their own
# alternations and groups. Software work (fix, refactor, implement, test) is done with file tools
# (read_file, patch), so it points at "file"; "code" is computing with execute_code (calculate,
# plot, statistics, analysing data). The words are general English for each kind of work, not the
# sample data's phrases; measure them on your own sessions with ``measure_text_accuracy``.
DEFAULT_TASK_KEYWORDS: dict[str, tuple[str, ...]] = {
    "code": (
        r"comput",
        r"calculat",
        r"plot",
        r"charts?\b",
        r"graphs?\b",
        r"histogram",
        r"visuali[sz]",
        r"data ?frames?\b",
        r"datasets?\b",
        r"pandas",
        r"numpy",
        r"scipy",
        r"sklearn|scikit",
        r"matplotlib",
        r"jupyter|notebook",
        r"statistic",
        r"analy[sz]",
        r"average",
        r"mean\b",
        r"median",
        r"percentiles?\b",
        r"quantiles?\b",
        r"correlat",
        r"distribut(ed|ion)",
        r"regression",
        r"linear model",
        r"fit (a|the)\b",
        r"coefficients?\b",
        r"forecast",
        r"predict",
        r"estimat",
        r"simulat",
        r"monte carlo",
        r"probabilit",
        r"math",
        r"equations?\b",
        r"solve\b",
        r"formula",
        r"how many\b",
        r"count (the|how|of|per)\b",
        r"per (second|minute|hour|day|week|month|year|user|customer)\b",
        r"(hourly|weekly|monthly|quarterly|yearly)\b",
        r"totals?\b",
        r"top \d+",
        r"metrics?\b",
        r"outliers?\b",
        r"aggregat",
        r"trends?\b",
        r"run (this|the|my) (python|code|snippet|script)",
    ),
    "file": (
        r"files?\b",
        r"folders?\b",
        r"director(y|ies)\b",
        r"rename",
        r"organi[sz]e",
        r"merge",
        r"readme",
        r"changelog",
        r"todo",
        r"pyproject",
        # A file name: the match starts at the name's first letter, so it needs the \w+ before the dot.
        r"[\w-]+\.(py|ts|tsx|go|js|rs|java|md|txt|toml|ya?ml|ini|cfg|json|jpe?g|png|pdf|docx?)\b",
        r"edit",
        r"patch",
        r"refactor",
        r"implement",
        r"fix",
        r"bugs?\b",
        r"failing tests?\b",
        r"unit tests?\b",
        r"tests?\b",
        r"function",
        r"modules?\b",
        r"class\b",
        r"debug",
        r"duplicat",
        r"option",
        r"version",
        r"dataclass",
        r"pars(e|er|es|ing)\b",
        r"write",
        r"save",
        r"create a",
        r"copy|move\b",
        r"delete|remove\b",
        r"replace",
        r"config(uration)?\b",
        r"document(s|ation)? (for|of)\b",
    ),
    "research": (
        r"research",
        r"look up",
        r"search (online|the web|for)",
        r"google",
        r"find (three|two|some|papers|sources|out|articles)",
        r"papers?\b",
        r"sources?\b",
        r"latest",
        r"news",
        r"compare",
        r"comparison",
        r"differences?\b",
        r"versus",
        r"vs\.?\b",
        r"what are\b",
        r"what is\b",
        r"what's\b",
        r"who\b",
        r"summari[sz]e",
        r"official docs",
        r"documentation",
        r"recommended",
        r"best practices?\b",
        r"developments?\b",
        r"published",
        r"articles?\b",
        r"changelog",
        r"urls?\b",
        r"https?://",
        r"websites?\b",
        r"web ?pages?\b",
        r"scrape",
        r"browse",
        r"pros and cons",
        r"reviews?\b",
    ),
    "terminal": (
        r"services?\b",
        r"restart",
        r"systemd",
        r"systemctl",
        r"journalctl",
        r"disk",
        r"space\b",
        r"cron",
        r"install",
        r"process(es)?\b",
        r"ports?\b",
        r"kill",
        r"logs?\b",
        r"shell",
        r"bash",
        r"terminal",
        r"commands?\b",
        r"docker",
        r"containers?\b",
        r"nginx",
        r"servers?\b",
        r"box\b",
        r"machine\b",
        r"ssh",
        r"sudo",
        r"apt\b",
        r"pip install",
        r"npm",
        r"brew",
        r"uptime",
        r"memory usage",
        r"cpu",
        r"backs? up|backups?\b",
        r"clone",
        r"run (the |its |all )?tests\b",
        r"runs\b",
        r"listening",
        r"permissions?\b",
        r"chmod|chown",
        r"mount",
        r"upgrade",
        r"reboot",
        r"firewall",
        r"daemon",
    ),
}


class MiningConfig(BaseModel):
    """The user's additions to mining's rule tables (``$KINDLING_HOME/mining.json``).

    Extra outcome rules run before the defaults (a rule with a default's name replaces it);
    ``disabled_rules`` turns rules off by name; ``tool_families`` and ``task_keywords`` add names
    to a family; ``trivial_tools`` adds to the trivial tools and ``keep_tools`` removes from them;
    ``skip_end_reasons`` adds session end reasons whose sessions are not mined;
    ``secret_patterns`` adds credentials to hide in examples, ``redact_secrets`` false hides none;
    ``personal_keys`` (field name -> placeholder type) and ``personal_patterns`` (placeholder type
    -> patterns) add personal data to replace in examples, ``scrub_personal_data`` false keeps it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome_rules: tuple[OutcomeRule, ...] = ()
    disabled_rules: tuple[str, ...] = ()
    tool_families: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    task_keywords: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    trivial_tools: tuple[str, ...] = ()
    keep_tools: tuple[str, ...] = ()
    skip_end_reasons: tuple[str, ...] = ()
    secret_patterns: tuple[str, ...] = ()
    redact_secrets: bool = True
    personal_keys: dict[str, str] = Field(default_factory=dict)
    personal_patterns: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    scrub_personal_data: bool = True

    @field_validator("personal_keys")
    @classmethod
    def _check_personal_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key, kind in value.items():
            if not key.strip():
                raise ValueError("a personal key name is not empty")
            if not _PLACEHOLDER_TYPE.match(kind):
                raise ValueError(f"placeholder type {kind!r} of key {key!r} is not lower-case snake_case")
        return value

    @field_validator("personal_patterns")
    @classmethod
    def _check_personal_patterns(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for kind, patterns in value.items():
            if not _PLACEHOLDER_TYPE.match(kind):
                raise ValueError(f"placeholder type {kind!r} is not lower-case snake_case")
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"personal pattern {pattern!r} is not a valid pattern: {exc}") from None
        return value

    @field_validator("secret_patterns")
    @classmethod
    def _check_secret_patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"secret pattern {pattern!r} is not a valid pattern: {exc}") from None
        return value

    @field_validator("tool_families", "task_keywords")
    @classmethod
    def _check_families(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        unknown = sorted(set(value) - set(FAMILIES))
        if unknown:
            raise ValueError(f"unknown family {unknown[0]!r}; families are {', '.join(FAMILIES)}")
        return value

    @field_validator("task_keywords")
    @classmethod
    def _check_keywords(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for family, words in value.items():
            for word in words:
                try:
                    re.compile(word)
                except re.error as exc:
                    raise ValueError(
                        f"keyword {word!r} of {family!r} is not a valid pattern: {exc}"
                    ) from None
        return value

    def rules(self) -> tuple[OutcomeRule, ...]:
        """Return the effective outcome rules: the user's first, then the defaults, minus disabled."""
        own = {rule.name for rule in self.outcome_rules}
        disabled = set(self.disabled_rules)
        merged = [*self.outcome_rules, *(r for r in DEFAULT_OUTCOME_RULES if r.name not in own)]
        return tuple(rule for rule in merged if rule.name not in disabled)

    def families(self) -> dict[str, tuple[str, ...]]:
        """Return the effective tool families: the defaults plus the user's names."""
        return {
            family: DEFAULT_TOOL_FAMILIES[family] + tuple(self.tool_families.get(family, ()))
            for family in FAMILIES
        }

    def keywords(self) -> dict[str, tuple[str, ...]]:
        """Return the effective task-text keywords per family: the defaults plus the user's."""
        return {
            family: DEFAULT_TASK_KEYWORDS[family] + tuple(self.task_keywords.get(family, ()))
            for family in FAMILIES
        }

    def trivial(self) -> frozenset[str]:
        """Return the effective trivial tools: defaults plus additions, minus ``keep_tools``."""
        return frozenset((*DEFAULT_TRIVIAL_TOOLS, *self.trivial_tools)) - frozenset(self.keep_tools)

    def secrets(self) -> tuple[str, ...]:
        """Return the patterns whose matches are hidden in examples: defaults plus the user's.

        Empty when ``redact_secrets`` is false.
        """
        if not self.redact_secrets:
            return ()
        return DEFAULT_SECRET_PATTERNS + self.secret_patterns

    def personal_keys_table(self) -> dict[str, str]:
        """Return the field names whose values are personal, with their placeholder type.

        The defaults plus the user's (a user's entry replaces a default of the same name).
        """
        return {**DEFAULT_PERSONAL_KEYS, **self.personal_keys}

    def personal_patterns_table(self) -> dict[str, tuple[str, ...]]:
        """Return the personal-data patterns per placeholder type: the defaults plus the user's."""
        merged = dict(DEFAULT_PERSONAL_PATTERNS)
        for kind, patterns in self.personal_patterns.items():
            merged[kind] = merged.get(kind, ()) + tuple(patterns)
        return merged

    def end_reasons(self) -> frozenset[str]:
        """Return the session end reasons whose sessions are not mined (lower-case)."""
        return frozenset(r.lower() for r in (*DEFAULT_SKIP_END_REASONS, *self.skip_end_reasons))


def mining_config_path() -> Path:
    """Return where the mining config is read from: ``$KINDLING_MINING_CONFIG`` or ``$KINDLING_HOME/mining.json``."""
    override = os.environ.get(CONFIG_ENV)
    return Path(override).expanduser() if override else kindling_home() / CONFIG_FILE_NAME


def parse_mining_config(data: Mapping[str, Any], *, origin: str = "mining config") -> MiningConfig:
    """Validate a mining config mapping. Raises ConfigError naming the first bad field."""
    try:
        return MiningConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(f"{origin}: {where}: {first['msg']}.") from None


_cache: dict[tuple[str, int, int], MiningConfig] = {}
_DEFAULTS = MiningConfig()


def load_mining_config(path: str | Path | None = None) -> MiningConfig:
    """Return the mining config from ``path`` (default ``mining_config_path()``).

    A missing file means the defaults. Raises ConfigError when the file is not readable, not a
    JSON object, or does not validate. Parsed files are cached by path, size and mtime.
    """
    target = Path(path) if path is not None else mining_config_path()
    try:
        info = target.stat()
    except FileNotFoundError:
        if path is not None or os.environ.get(CONFIG_ENV):
            raise ConfigError(f"Mining config {target} does not exist.") from None
        return _DEFAULTS
    except OSError as exc:
        raise ConfigError(f"Cannot read mining config {target}: {exc.strerror or exc}.") from None
    key = (str(target), info.st_mtime_ns, info.st_size)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        data = orjson.loads(target.read_bytes())
    except OSError as exc:
        raise ConfigError(f"Cannot read mining config {target}: {exc.strerror or exc}.") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"Mining config {target} is not valid JSON: {exc}.") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Mining config {target} must hold a JSON object.")
    config = parse_mining_config(data, origin=f"Mining config {target}")
    _cache.clear()
    _cache[key] = config
    return config
