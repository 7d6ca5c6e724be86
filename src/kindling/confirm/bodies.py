"""Request bodies of the HTTP API, parsed by hand so that bad JSON is a 400 (as in the prototype).

FastAPI would answer 422 for these; the prototype's clients expect 400. The pydantic models still
describe every body in the OpenAPI schema through ``openapi_body``.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kindling.errors import ConfirmError

Model = TypeVar("Model", bound=BaseModel)


class SubmitBody(BaseModel):
    """``POST /confirm``: what the agent wants to do, and why."""

    model_config = ConfigDict(extra="ignore")

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
        default=None, description="Clamped to the daemon's range (30..3600 by default)."
    )


class ApproveBody(BaseModel):
    """``POST /confirm/{id}/approve``."""

    model_config = ConfigDict(extra="ignore")

    approver: str | None = Field(
        default=None, max_length=200, description="A label; the token decides who approved."
    )
    reason: str | None = Field(default=None, max_length=10_000)
    digest: str | None = Field(
        default=None, max_length=64, description="The digest the approver saw; refused if it differs."
    )


class DenyBody(BaseModel):
    """``POST /confirm/{id}/deny``."""

    model_config = ConfigDict(extra="ignore")

    denier: str | None = Field(
        default=None, max_length=200, description="A label; the token decides who denied."
    )
    reason: str | None = Field(default=None, max_length=10_000)
    digest: str | None = Field(
        default=None, max_length=64, description="The digest the approver saw; refused if it differs."
    )


class TokenBody(BaseModel):
    """``POST /tokens``: create a token (admin)."""

    role: str = Field(description="agent, approver or admin.")
    name: str = Field(min_length=1, max_length=64)


class RuleBody(BaseModel):
    """``POST /whitelist``: auto-approve an action (or glob), globally or in one session (admin)."""

    action: str = Field(min_length=1, max_length=200)
    session_key: str | None = Field(default=None, max_length=200)


def openapi_body(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """Return ``openapi_extra`` documenting ``model`` as the JSON request body."""
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


async def read_body(request: Request, model: type[Model], *, max_bytes: int, optional: bool = False) -> Model:
    """Parse and validate the JSON body of ``request`` as ``model``.

    An empty body is allowed when ``optional``. Raises ConfirmError 413 past ``max_bytes``,
    400 when the body is not JSON, not an object, or fails validation.
    """
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise ConfirmError(f"Body is larger than {max_bytes} bytes.", status_code=413)
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > max_bytes:
            raise ConfirmError(f"Body is larger than {max_bytes} bytes.", status_code=413)
    if not raw.strip():
        if optional:
            return model()
        raise ConfirmError("The body must be a JSON object.", status_code=400)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ConfirmError("The body is not valid JSON.", status_code=400) from None
    if not isinstance(data, dict):
        raise ConfirmError("The body must be a JSON object.", status_code=400)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ConfirmError(f"Invalid body: {problems}.", status_code=400) from None
