"""Ask the user's model, through the official SDKs, with retries; answers come back in one shape.

``ModelClient`` speaks OpenAI's chat completions (``AsyncOpenAI``, any compatible endpoint) or, with
``api_format="anthropic"``, Anthropic's Messages API (``AsyncAnthropic``, the ``anthropic`` extra).
Retries are its own (the SDKs' are turned off) so they are counted: 408, 409, 429 and 5xx answers
and refused connections are retried with exponential backoff, honouring ``Retry-After`` up to a
minute. A request the endpoint rejects (400, 413, 422: too long, malformed for this model) comes
back as ``{"rejected": reason}``; a wrong key, a missing model or running out of retries raises an
EndpointError.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from kindling.apierrors import retry_after as server_wait
from kindling.apierrors import short, status_detail
from kindling.errors import ConfigError, EndpointError
from kindling.warmup.convert import to_anthropic

__all__ = ["ANTHROPIC", "FORMATS", "OPENAI", "ModelClient", "anthropic_request", "request_body"]

OPENAI = "openai"
ANTHROPIC = "anthropic"
FORMATS = (OPENAI, ANTHROPIC)
MAX_RETRY_AFTER = 60.0
ANTHROPIC_MAX_TOKENS = 1024
_RETRIED = frozenset({408, 409, 429})
_REJECTED = frozenset({400, 413, 422})


def request_body(
    api_format: str,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    *,
    temperature: float | None,
    max_tokens: int | None,
) -> dict[str, Any]:
    """Return the request body the endpoint gets (for ``api_format``) from OpenAI-format messages.

    ``temperature`` and ``max_tokens`` left None are not sent (the model's own defaults).
    """
    if api_format == ANTHROPIC:
        return anthropic_request(model, messages, tools, temperature=temperature, max_tokens=max_tokens)
    body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages]}
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if tools:
        body["tools"] = [dict(t) for t in tools]
    return body


def anthropic_request(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    *,
    temperature: float | None,
    max_tokens: int | None,
) -> dict[str, Any]:
    """Return a Messages API body: system text apart, tool calls as ``tool_use`` blocks.

    The Messages API needs ``max_tokens``: None sends ``ANTHROPIC_MAX_TOKENS``.
    """
    converted = to_anthropic(messages)
    body: dict[str, Any] = {
        "model": model,
        "messages": converted["messages"],
        "max_tokens": ANTHROPIC_MAX_TOKENS if max_tokens is None else max_tokens,
    }
    if temperature is not None:
        body["temperature"] = temperature
    if converted.get("system"):
        body["system"] = converted["system"]
    if tools:
        body["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description") or "",
                "input_schema": t["function"].get("parameters") or {"type": "object"},
            }
            for t in tools
        ]
    return body


@dataclass
class ClientStats:
    """What the client did: requests sent, retries, and answers the endpoint rejected."""

    sent: int = 0
    retried: int = 0
    rejected: int = 0


class ModelClient:
    """One endpoint and model; ``complete`` returns an answer dict (see ``_answer``).

    Raises ConfigError for an unknown format or a missing SDK.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        api_format: str = OPENAI,
        retries: int = 6,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        timeout: float = 120.0,
    ) -> None:
        if api_format not in FORMATS:
            raise ConfigError(f"Unknown API format {api_format!r}; use openai or anthropic.")
        self.base_url = base_url
        self.api_format = api_format
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.stats = ClientStats()
        if api_format == ANTHROPIC:
            try:
                import anthropic
            except ImportError as exc:
                raise ConfigError(
                    "--format anthropic needs the anthropic package: pip install 'kindling-agent[anthropic]'."
                ) from exc
            from anthropic.types import Message

            self._sdk: Any = anthropic
            self._reply_type: Any = Message
            self._client: Any = anthropic.AsyncAnthropic(
                base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0
            )
        else:
            import openai
            from openai.types.chat import ChatCompletion

            self._sdk = openai
            self._reply_type = ChatCompletion
            self._client = openai.AsyncOpenAI(
                base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0
            )

    async def close(self) -> None:
        """Close the SDK client's connections."""
        await self._client.close()

    async def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Send ``body`` (from ``request_body``) and return the answer, retrying what may pass later.

        The answer is ``{"content", "calls": [{"name", "arguments"}], "finish_reason",
        "prompt_tokens", "completion_tokens"}``, or ``{"rejected": reason}`` for a request the
        endpoint refuses. Raises EndpointError for a wrong key, a missing model or endpoint, or
        when the retries run out.
        """
        sdk = self._sdk
        last = ""
        for attempt in range(self.retries + 1):
            retry_after: float | None = None
            self.stats.sent += 1
            try:
                # The SDK's documented raw POST: the body is already in the API's shape, and the
                # typed ``create`` would walk every message again to transform it (about 20 ms of
                # CPU per long conversation, for nothing).
                if self.api_format == ANTHROPIC:
                    reply = await self._client.post("/v1/messages", cast_to=self._reply_type, body=body)
                    return _anthropic_answer(reply)
                completion = await self._client.post("/chat/completions", cast_to=self._reply_type, body=body)
                return _openai_answer(completion)
            except sdk.APIStatusError as exc:
                status = exc.status_code
                last = f"HTTP {status}: {status_detail(exc)}"
                if status in _REJECTED:
                    self.stats.rejected += 1
                    return {"rejected": last}
                if status not in _RETRIED and status < 500:
                    raise EndpointError(f"{self.base_url} answered {last}", base_url=self.base_url) from exc
                retry_after = server_wait(exc.response.headers)
            except sdk.APIConnectionError as exc:
                cause = exc.__cause__ or exc
                last = f"cannot connect ({short(str(cause)) or type(cause).__name__})"
            except ValueError as exc:  # a 200 whose body is not JSON
                raise EndpointError(
                    f"{self.base_url} answered with a body that is not JSON ({short(str(exc))}).",
                    base_url=self.base_url,
                ) from exc
            if attempt == self.retries:
                break
            self.stats.retried += 1
            delay = min(self.max_backoff, self.backoff * (2**attempt)) * (0.5 + random.random() / 2)
            if retry_after is not None:
                delay = min(retry_after, MAX_RETRY_AFTER)
            await asyncio.sleep(delay)
        raise EndpointError(
            f"{self.base_url} kept failing ({last}); gave up after {self.retries} retries. "
            "The answers so far are kept: run again to continue.",
            base_url=self.base_url,
        )


def _openai_answer(completion: Any) -> dict[str, Any]:
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise ValueError("the answer has no choices")
    message = choices[0].message
    calls = [
        {"name": call.function.name, "arguments": call.function.arguments}
        for call in (message.tool_calls or [])
        if getattr(call, "function", None) is not None
    ]
    usage = getattr(completion, "usage", None)
    return {
        "content": message.content,
        "calls": calls,
        "finish_reason": choices[0].finish_reason,
        "prompt_tokens": getattr(usage, "prompt_tokens", None),
        "completion_tokens": getattr(usage, "completion_tokens", None),
    }


def _anthropic_answer(reply: Any) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in getattr(reply, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            calls.append({"name": block.name, "arguments": orjson.dumps(block.input).decode("utf-8")})
    usage = getattr(reply, "usage", None)
    return {
        "content": "".join(texts) or None,
        "calls": calls,
        "finish_reason": getattr(reply, "stop_reason", None),
        "prompt_tokens": getattr(usage, "input_tokens", None),
        "completion_tokens": getattr(usage, "output_tokens", None),
    }
