"""Request bodies of the HTTP API, parsed by hand so that bad JSON is a 400 (as in the prototype).

FastAPI would answer 422 for these; the prototype's clients expect 400. The pydantic models still
describe every body in the OpenAPI schema through ``openapi_body``.

What is refused here, before anything is stored: JSON nested deeper than ``MAX_DEPTH`` (deep
values broke every later read of the request), NUL characters (PostgreSQL cannot store them, and
SQLite would then disagree with it), and values of the wrong JSON type (``"30"`` or ``true`` for
``timeout_seconds``). Integers of any size are kept exact, so the digest covers what was sent.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import orjson
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kindling.errors import ConfirmError

Model = TypeVar("Model", bound=BaseModel)

# How deeply a body may nest (objects and arrays); far above any real request, far below the
# depth at which encoding a response runs out of stack.
MAX_DEPTH = 32


class SubmitBody(BaseModel):
    """``POST /confirm``: what the agent wants to do, and why."""

    model_config = ConfigDict(extra="ignore", strict=True)

    action: str = Field(
        min_length=1, max_length=200, description="Machine name of the action, e.g. deploy_production."
    )
    description: str = Field(
        min_length=1, max_length=100_000, description="What will happen, for the approver."
    )
    details: Any = Field(default=None, description="Any JSON: shown to the approver in full.")
    requester: str | None = Field(default=None, max_length=200, description="A label for who asks.")
    session_key: str | None = Field(
        default=None, max_length=200, description="The agent session, for per-session whitelists."
    )
    timeout_seconds: int | None = Field(
        default=None,
        description="A JSON integer (not a string or a boolean); clamped to the daemon's range "
        "(30..3600 by default).",
    )


class ApproveBody(BaseModel):
    """``POST /confirm/{id}/approve``."""

    model_config = ConfigDict(extra="ignore", strict=True)

    approver: str | None = Field(
        default=None, max_length=200, description="A label; the token decides who approved."
    )
    reason: str | None = Field(default=None, max_length=10_000)
    digest: str | None = Field(
        default=None, max_length=64, description="The digest the approver saw; refused if it differs."
    )


class DenyBody(BaseModel):
    """``POST /confirm/{id}/deny``."""

    model_config = ConfigDict(extra="ignore", strict=True)

    denier: str | None = Field(
        default=None, max_length=200, description="A label; the token decides who denied."
    )
    reason: str | None = Field(default=None, max_length=10_000)
    digest: str | None = Field(
        default=None, max_length=64, description="The digest the approver saw; refused if it differs."
    )


class TokenBody(BaseModel):
    """``POST /tokens``: create a token (admin)."""

    model_config = ConfigDict(strict=True)

    role: str = Field(description="agent, approver or admin.")
    name: str = Field(min_length=1, max_length=64)


class RuleBody(BaseModel):
    """``POST /whitelist``: auto-approve an action (or glob), globally or in one session (admin)."""

    model_config = ConfigDict(strict=True)

    action: str = Field(min_length=1, max_length=200)
    session_key: str | None = Field(default=None, max_length=200)


class ErrorBody(BaseModel):
    """Every error answer: one sentence."""

    error: str = Field(description="What went wrong, in one sentence.")


ERROR_MEANINGS = {
    400: "Bad request: not JSON, a wrong type, too deep, a NUL character, or a bad parameter",
    401: "No bearer token, or an unknown or revoked one",
    403: "The token's role may not do this (or it is the requester deciding its own request)",
    404: "No such request, token or rule (another agent's request answers 404 too)",
    409: "Already decided, expired, or the name is taken",
    412: "The digest differs from the request as stored",
    413: "The body is larger than the daemon's limit",
    422: "The Idempotency-Key was already used for a different request",
    429: "Rate limited, or too many long polls open",
    503: "The database is unavailable",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """Return the ``responses=`` of a route documenting ``codes`` (and 503) with the error body."""
    return {code: {"description": ERROR_MEANINGS[code], "model": ErrorBody} for code in (*codes, 503)}


def openapi_body(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """Return ``openapi_extra`` documenting ``model`` as the JSON request body."""
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


async def read_body(request: Request, model: type[Model], *, optional: bool = False) -> Model:
    """Parse and validate the JSON body of ``request`` as ``model`` (``parse_body``).

    The app's edge holds the body to the daemon's limit (``edge.BodyLimit``): past it, reading
    raises 413. Raises ConfirmError 400 as ``parse_body`` does.
    """
    return parse_body(await request.body(), model, optional=optional)


def parse_body(raw: bytes, model: type[Model], *, optional: bool = False) -> Model:
    """Parse and validate a JSON body as ``model``.

    An empty body is allowed when ``optional``. Raises ConfirmError 400 when the body is not JSON,
    not an object, or fails validation.
    """
    if not raw.strip():
        if optional:
            return model()
        raise ConfirmError("The body must be a JSON object.", status_code=400)
    data = parse_json(raw)
    if not isinstance(data, dict):
        raise ConfirmError("The body must be a JSON object.", status_code=400)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ConfirmError(f"Invalid body: {problems}.", status_code=400) from None


def parse_json(raw: bytes) -> Any:
    """Return the JSON value in ``raw``, with integers of any size exact.

    Raises ConfirmError 400 when it is not JSON, nests deeper than ``MAX_DEPTH``, holds a NUL
    character or a number that is not finite.
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):
            raise ConfirmError(f"The body nests deeper than {MAX_DEPTH} levels.", status_code=400) from None
        raise ConfirmError("The body is not valid JSON.", status_code=400) from None
    has_float = check_value(data)
    if has_float:
        # orjson reads integers past 64 bits as floats; the standard parser keeps them exact.
        try:
            data = json.loads(raw, parse_constant=_refuse_constant)
        except ValueError as exc:
            raise ConfirmError(
                f"The body holds a number that cannot be kept: {exc}.", status_code=400
            ) from None
    return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_value(value: Any) -> bool:
    """Check a parsed JSON value; return True when it holds a float anywhere.

    Raises ConfirmError 400 when it nests deeper than ``MAX_DEPTH`` or holds a NUL character
    (in a key or a string). Walks without recursion, so no depth can exhaust the stack.
    """
    has_float = False
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ConfirmError("Text may not contain NUL characters (\\u0000).", status_code=400)
        elif isinstance(item, float):
            has_float = True
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise ConfirmError(f"The body nests deeper than {MAX_DEPTH} levels.", status_code=400)
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
    return has_float


def nesting_depth(value: Any) -> int:
    """Return how deeply ``value`` nests objects and arrays (0 for a scalar), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            deepest = max(deepest, depth + 1)
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
            deepest = max(deepest, depth + 1)
    return deepest


def displayable_details(details: Any) -> Any:
    """Return ``details`` as it may be shown: a stored value nested past ``MAX_DEPTH`` (from before
    submit bounded it) becomes a notice, since encoding it could exhaust the stack."""
    depth = nesting_depth(details)
    if depth <= MAX_DEPTH:
        return details
    return {
        "not_shown": f"These details nest {depth} levels deep, past the {MAX_DEPTH} allowed; "
        "they cannot be shown, so deny this request."
    }
