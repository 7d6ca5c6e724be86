"""A tool-calling loop over any OpenAI-compatible chat-completions endpoint.

``run`` sends the conversation, executes the tool calls the model asks for through a
:class:`~kindling.agent.registry.ToolRegistry`, sends the results back, and stops at a final
answer or at a hard iteration cap. It never raises for endpoint trouble: an unreachable server,
a timeout, an HTTP error or a malformed body ends the run with ``RunResult.error`` set to the
sentence an :class:`~kindling.errors.EndpointError` would carry. The retries are ours, not the
SDK's (its ``max_retries`` is 0), so they are visible and testable: 429 and 5xx answers and
refused connections are retried with exponential backoff, honouring ``Retry-After``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kindling.agent.registry import ToolRegistry, error_result
from kindling.apierrors import retry_after as server_wait
from kindling.apierrors import short, status_detail
from kindling.errors import EndpointError

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

# A local server (vLLM, llama.cpp, Ollama) needs no key, but the SDK refuses an empty one.
NO_API_KEY = "EMPTY"
MAX_RETRY_AFTER = 30.0


@dataclass(frozen=True)
class Runtime:
    """Where and how to call the model: the endpoint, the model name, timeouts and retries.

    ``timeout`` is seconds per request; ``max_retries`` is how many times a 429/5xx answer or a
    refused connection is retried; ``backoff`` is the first retry delay, doubled each time up to
    ``max_backoff``.
    """

    model: str
    base_url: str
    api_key: str = ""
    timeout: float = 60.0
    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0

    def redacted(self) -> dict[str, Any]:
        """Return the runtime as a dict with the API key masked, for logs and JSON output."""
        return {
            "model": self.model,
            "base_url": self.base_url,
            "api_key": "***" if self.api_key else "",
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }


@dataclass
class Usage:
    """Token counts summed over every request of a run, and the number of requests made."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    requests: int = 0

    def add(self, usage: Any) -> None:
        """Add one response's ``usage`` object (missing fields count as zero)."""
        self.requests += 1
        if usage is None:
            return
        self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
        self.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        self.total_tokens += int(getattr(usage, "total_tokens", 0) or 0)

    def as_dict(self) -> dict[str, int]:
        """Return the counts as a plain dict."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "requests": self.requests,
        }


@dataclass
class RunResult:
    """What a run produced.

    ``messages`` is the whole conversation (the input messages first, unchanged, then every
    assistant turn and tool result); ``final_text`` the last assistant text (``""`` when there
    was none); ``error`` is None on success, else one sentence saying what went wrong.
    """

    messages: list[dict[str, Any]]
    final_text: str
    usage: Usage
    error: str | None = None
    iterations: int = 0
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        """True when the run ended with a final answer and no error."""
        return self.error is None


@dataclass
class _Attempt:
    """The outcome of one request after our retries: a completion, or an error sentence."""

    completion: Any = None
    error: str | None = None
    cancelled: bool = False
    waits: list[float] = field(default_factory=list)


def run(
    messages: list[dict[str, Any]],
    *,
    runtime: Runtime,
    tools: ToolRegistry | None = None,
    max_iterations: int = 10,
    cancel: threading.Event | None = None,
    advertise_all_tools: bool = True,
    stop_on_tool_error: bool = False,
) -> RunResult:
    """Run the tool-calling loop until a final answer, an error, cancellation or the cap.

    Returns a RunResult; never raises for endpoint failures (``error`` is set instead).
    ``advertise_all_tools`` sends every registered tool's schema, whitelisted or not, so the
    request prefix matches the caller's and a provider's prompt cache still hits; set it False
    to advertise only the tools that may run. ``stop_on_tool_error`` ends the run with ``error``
    set when a tool handler raises (the model still gets the error result in ``messages``).
    """
    conversation: list[dict[str, Any]] = list(messages)
    usage = Usage()
    if max_iterations < 1:
        return RunResult(conversation, "", usage, error="max_iterations must be at least 1.")
    if not runtime.base_url.startswith(("http://", "https://")):
        # Caught here, not by the SDK: its connection error would be retried as if transient.
        return RunResult(
            conversation,
            "",
            usage,
            error=_endpoint_error(runtime, "the base URL must start with http:// or https://."),
        )
    try:
        client = _client(runtime)
    except Exception as exc:
        return RunResult(
            conversation, "", usage, error=_endpoint_error(runtime, f"cannot create a client: {exc}")
        )
    tool_list = tools.openai_tools(only_allowed=not advertise_all_tools) if tools is not None else []
    final_text = ""
    try:
        for iteration in range(1, max_iterations + 1):
            if cancel is not None and cancel.is_set():
                return RunResult(
                    conversation, final_text, usage, "Run cancelled.", iteration - 1, cancelled=True
                )
            attempt = _complete(client, runtime, conversation, tool_list, cancel)
            if attempt.cancelled:
                return RunResult(
                    conversation, final_text, usage, "Run cancelled.", iteration - 1, cancelled=True
                )
            if attempt.error is not None:
                return RunResult(conversation, final_text, usage, attempt.error, iteration - 1)
            usage.add(getattr(attempt.completion, "usage", None))
            parsed = _assistant_message(attempt.completion)
            if isinstance(parsed, str):
                return RunResult(conversation, final_text, usage, _endpoint_error(runtime, parsed), iteration)
            if cancel is not None and cancel.is_set() and parsed.get("tool_calls"):
                # Cancelled while the request was in flight: the calls were asked for on a
                # superseded snapshot, so none of them runs (and none is left unanswered).
                return RunResult(conversation, final_text, usage, "Run cancelled.", iteration, cancelled=True)
            conversation.append(parsed)
            if parsed.get("content"):
                final_text = str(parsed["content"])
            calls = parsed.get("tool_calls") or []
            if not calls:
                return RunResult(conversation, final_text, usage, None, iteration)
            for call in calls:
                answer = _answer(call, tools)
                conversation.append(answer)
                if stop_on_tool_error and tools is not None and tools.log and tools.log[-1].status == "error":
                    # Answer the remaining calls so the conversation stays protocol-valid.
                    for rest in calls[calls.index(call) + 1 :]:
                        conversation.append(_skipped(rest))
                    return RunResult(conversation, final_text, usage, _tool_failure(answer), iteration)
        return RunResult(
            conversation,
            final_text,
            usage,
            f"Stopped after {max_iterations} iterations: the model was still calling tools.",
            max_iterations,
        )
    finally:
        client.close()


def _client(runtime: Runtime) -> openai.OpenAI:
    import openai

    return openai.OpenAI(
        base_url=runtime.base_url,
        api_key=runtime.api_key or NO_API_KEY,
        timeout=runtime.timeout,
        max_retries=0,  # retries are ours: counted, logged, cancellable and testable
    )


def _endpoint_error(runtime: Runtime, detail: str) -> str:
    return str(EndpointError(f"{runtime.base_url}: {detail}", base_url=runtime.base_url))


def _complete(
    client: openai.OpenAI,
    runtime: Runtime,
    conversation: list[dict[str, Any]],
    tool_list: list[dict[str, Any]],
    cancel: threading.Event | None,
) -> _Attempt:
    """Make one chat-completions request, retrying 429/5xx and refused connections."""
    import openai

    attempt = _Attempt()
    request: dict[str, Any] = {"model": runtime.model, "messages": conversation}
    if tool_list:
        request["tools"] = tool_list
    for retry in range(runtime.max_retries + 1):
        retry_after: float | None = None
        try:
            attempt.completion = client.chat.completions.create(**request)
            attempt.error = None
            return attempt
        except openai.APITimeoutError:
            # A timeout already cost `timeout` seconds; retrying would multiply the wait.
            attempt.error = _endpoint_error(runtime, f"no answer within {runtime.timeout:g}s (timed out).")
            return attempt
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            attempt.error = _endpoint_error(runtime, f"cannot connect ({cause}).")
        except openai.APIStatusError as exc:
            status = exc.status_code
            attempt.error = _endpoint_error(runtime, f"HTTP {status}: {status_detail(exc)}")
            if status != 429 and status < 500:
                return attempt
            retry_after = server_wait(exc.response.headers)
        except ValueError as exc:
            # The SDK raises json's ValueError when a 200 body is not JSON; a broken server
            # rarely heals in a second, so this is not retried.
            attempt.error = _endpoint_error(runtime, f"the response is not valid JSON ({exc}).")
            return attempt
        except openai.OpenAIError as exc:
            attempt.error = _endpoint_error(runtime, f"{type(exc).__name__}: {short(str(exc))}")
            return attempt
        except Exception as exc:  # e.g. a message that cannot be serialised: still a result, not a raise
            logger.exception("The request to %s could not be made.", runtime.base_url)
            attempt.error = _endpoint_error(
                runtime, f"the request failed: {type(exc).__name__}: {short(str(exc))}"
            )
            return attempt
        if retry == runtime.max_retries:
            break
        delay = min(runtime.max_backoff, runtime.backoff * (2**retry))
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
        attempt.waits.append(delay)
        logger.warning("Retrying %s in %.2fs after: %s", runtime.base_url, delay, attempt.error)
        if _sleep(delay, cancel):
            attempt.cancelled = True
            return attempt
    if runtime.max_retries:
        attempt.error = f"{attempt.error} (gave up after {runtime.max_retries} retries)"
    return attempt


def _sleep(seconds: float, cancel: threading.Event | None) -> bool:
    """Wait ``seconds``; return True when cancelled meanwhile."""
    if cancel is None:
        time.sleep(seconds)
        return False
    return cancel.wait(seconds)


def _assistant_message(completion: Any) -> dict[str, Any] | str:
    """Turn a completion into an assistant message dict, or return why it is malformed."""
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        return "the response has no choices (malformed completion)."
    message = getattr(choices[0], "message", None)
    if message is None:
        return "the first choice has no message (malformed completion)."
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        return "the message content is not text (malformed completion)."
    result: dict[str, Any] = {"role": "assistant", "content": content}
    raw_calls = getattr(message, "tool_calls", None) or []
    calls: list[dict[str, Any]] = []
    for index, raw in enumerate(raw_calls):
        function = getattr(raw, "function", None)
        name = getattr(function, "name", None)
        call_id = getattr(raw, "id", None)
        if not isinstance(name, str) or not name:
            return f"tool call {index} has no function name (malformed completion)."
        arguments = getattr(function, "arguments", None)
        calls.append(
            {
                "id": call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                "type": "function",
                "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else ""},
            }
        )
    if calls:
        result["tool_calls"] = calls
    return result


def _answer(call: dict[str, Any], tools: ToolRegistry | None) -> dict[str, Any]:
    """Execute one tool call and return the tool message that answers it."""
    function = call["function"]
    name = function["name"]
    if tools is None:
        content = error_result(f"Tool '{name}' was not run: this run has no tools.")
    else:
        content = tools.dispatch(name, function.get("arguments"), call_id=call["id"])
    return {"role": "tool", "tool_call_id": call["id"], "content": content}


def _skipped(call: dict[str, Any]) -> dict[str, Any]:
    content = error_result("Not run: an earlier tool call in this turn failed and the run stopped.")
    return {"role": "tool", "tool_call_id": call["id"], "content": content}


def _tool_failure(answer: dict[str, Any]) -> str:
    try:
        detail = json.loads(answer["content"]).get("error")
    except (ValueError, AttributeError):
        detail = None
    return str(detail or "A tool failed.")
