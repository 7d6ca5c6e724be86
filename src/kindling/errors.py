"""Every error kindling raises on purpose.

Each one carries a user-facing sentence (``str(err)``) and the context a caller needs
(``.path``, ``.session_id``, ``.template``, ...). Errors from dependencies (sqlite3,
SQLAlchemy, httpx, openai) are translated into these at the boundary, never leaked raw.

    KindlingError                      base; ``exit_code`` is what the CLI exits with
    ├── ConfigError                    a bad setting or environment variable
    ├── InvalidNameError               a name that would become a path is unsafe (.name, .kind)
    ├── NotFoundError                  a named thing does not exist (.kind, .name)
    ├── SourceError                    a session source cannot be opened or read (.path); exit 2
    │   ├── UnknownFormatError         the format of a source cannot be detected
    │   └── FormatMismatchError        nothing of a source could be read in the format forced on it
    ├── StoreError                     a store (file, SQLite, PostgreSQL) failed (.path)
    ├── TemplateError                  a template is invalid or cannot be saved (.template)
    ├── ConversationError              a conversation breaks the tool-call protocol
    ├── EndpointError                  an OpenAI-compatible endpoint failed (.base_url)
    ├── ReviewError                    a background review failed
    ├── ConfirmError                   the confirmation daemon or its client failed (.status_code)
    ├── ScheduleError                  a schedule expression is not understood (.expression)
    ├── ModelContextError              a model's context window is below the minimum
    └── ToolCallError                  an agent-facing tool call cannot be done as asked (MCP tool errors)
"""

from __future__ import annotations

from pathlib import Path


class KindlingError(Exception):
    """Base class: catch this to catch every error kindling raises on purpose."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(KindlingError):
    """A setting or environment variable has a value kindling cannot use."""


class InvalidNameError(KindlingError):
    """A name that becomes a file name or a key is unsafe or malformed."""

    exit_code = 2

    def __init__(self, message: str, *, name: str, kind: str = "name") -> None:
        super().__init__(message)
        self.name = name
        self.kind = kind


class NotFoundError(KindlingError):
    """A named thing (template, session, skill, job, request) does not exist."""

    def __init__(self, message: str, *, kind: str, name: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.name = name


class SourceError(KindlingError):
    """A session source cannot be opened or read at all."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.path = str(path) if path is not None else None


class UnknownFormatError(SourceError):
    """The format of a source could not be detected; ``--format`` forces one."""


class FormatMismatchError(SourceError):
    """A source read in a forced ``--format`` gave no session, only skipped records."""


class StoreError(KindlingError):
    """A store (JSON files, SQLite, PostgreSQL) could not be read or written."""

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.path = str(path) if path is not None else None


class TemplateError(KindlingError):
    """A template is invalid, or cannot be loaded, saved or exported."""

    def __init__(self, message: str, *, template: str | None = None) -> None:
        super().__init__(message)
        self.template = template


class ConversationError(KindlingError):
    """A conversation breaks the tool-call protocol (unanswered call, duplicate id, ...)."""

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class EndpointError(KindlingError):
    """An OpenAI-compatible endpoint failed: unreachable, timed out, or answered badly."""

    def __init__(self, message: str, *, base_url: str | None = None) -> None:
        super().__init__(message)
        self.base_url = base_url


class ReviewError(KindlingError):
    """A background review could not run or did not finish."""


class ConfirmError(KindlingError):
    """The confirmation daemon refused a request, or its client could not reach it."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ScheduleError(KindlingError):
    """A schedule expression is not one kindling understands."""

    exit_code = 2

    def __init__(self, message: str, *, expression: str | None = None) -> None:
        super().__init__(message)
        self.expression = expression


class ModelContextError(KindlingError):
    """A model's context window is smaller than the minimum a job needs."""

    def __init__(self, message: str, *, model: str, context_length: int, minimum: int) -> None:
        super().__init__(message)
        self.model = model
        self.context_length = context_length
        self.minimum = minimum


class ToolCallError(KindlingError):
    """A tool call from an agent (over MCP) cannot be done as asked; the message is what the agent reads."""
