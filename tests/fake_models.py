"""Fake model servers for ``kindling eval``: FastAPI apps served by uvicorn on loopback, in a thread.

A ``ModelServer`` answers chat completions (``POST /v1/chat/completions``) and Anthropic's Messages
API (``POST /v1/messages``) with what its ``behaviour`` decides for the conversation it gets. It
records every request body, and can answer ``faults`` first (a list of HTTP statuses, each used
once, e.g. ``[429]`` then the real answer) and wait ``latency`` seconds before each answer.

A behaviour sees the request as a ``Context``: the messages, the tools offered, the past examples
of a kindling warm-up in it (each request with the calls shown under it) and the conversation
proper (the messages with the warm-up taken out). It returns a ``Reply``: text, or a call.

The behaviours ``kindling eval``'s tests need:

- ``IgnoresContext``: answers from the conversation proper only, so cold and warm get one answer;
- ``CopiesExamples``: copies the tool (and arguments) of the most similar past example in its
  context, the call at the position the conversation has reached; no call without examples;
- ``HurtByLongContext``: the right answer (from an ``oracle``) while the whole context is short,
  no call once it is longer than ``limit`` characters;
- ``Coin``: the right answer with one probability without examples and another with them, seeded,
  so the true difference is known.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

FRAME_INTRO = "[Past examples from earlier sessions"
FRAME_END = "End of the past examples. The real conversation starts now."
_PAST = re.compile(r"^(?:\[Past examples[^\]]*\]\s*)?Past request \d+: ", re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class Reply:
    """What a fake model answers: text, or one call (name, arguments)."""

    text: str | None = None
    call: tuple[str, dict[str, Any]] | None = None


@dataclass
class Example:
    """A past request of a warm-up and the calls shown under it, in order."""

    request: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class Context:
    """A request as a behaviour sees it."""

    messages: list[dict[str, Any]]
    tools: list[str]
    examples: list[Example]
    proper: list[dict[str, Any]]

    @property
    def chars(self) -> int:
        return len(json.dumps(self.messages))


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(call["function"]["arguments"] or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def read_context(messages: list[dict[str, Any]], tools: list[str]) -> Context:
    """Split ``messages`` into the warm-up's past examples and the conversation proper."""
    start = next(
        (
            i
            for i, m in enumerate(messages)
            if m["role"] == "user" and FRAME_INTRO in str(m.get("content") or "")
        ),
        None,
    )
    if start is None:
        return Context(messages, tools, [], list(messages))
    end = next(
        i
        for i in range(start, len(messages))
        if messages[i]["role"] == "assistant" and FRAME_END in str(messages[i].get("content") or "")
    )
    examples: list[Example] = []
    for message in messages[start:end]:
        content = str(message.get("content") or "")
        if message["role"] == "user":
            examples.append(Example(_PAST.sub("", content)))
        for call in message.get("tool_calls") or []:
            examples[-1].calls.append((call["function"]["name"], _arguments(call)))
    return Context(messages, tools, examples, messages[:start] + messages[end + 1 :])


def conversation_key(messages: list[dict[str, Any]]) -> str:
    """A key for a conversation proper (what an oracle is indexed by)."""
    shown = [
        [m["role"], m.get("content"), [c["function"] for c in m.get("tool_calls") or []]] for m in messages
    ]
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def _request_text(proper: list[dict[str, Any]]) -> str:
    return " ".join(str(m.get("content") or "") for m in proper if m["role"] == "user")


def _position(proper: list[dict[str, Any]]) -> int:
    return sum(1 for m in proper if m["role"] == "assistant" and m.get("tool_calls"))


class IgnoresContext:
    """Answers from the conversation proper alone: the right answer for about half the steps (chosen
    by a hash of the conversation), no call for the rest. A warm-up changes nothing."""

    def __init__(self, oracle: dict[str, tuple[str, dict[str, Any]]]) -> None:
        self.oracle = oracle

    def __call__(self, context: Context) -> Reply:
        key = conversation_key(context.proper)
        if int(key[:8], 16) % 2 == 0 and key in self.oracle:
            return Reply(call=self.oracle[key])
        return Reply(text="Could you tell me more?")


class CopiesExamples:
    """Copies the call of the most similar past example in its context (word overlap of the
    requests), at the step the conversation has reached; without examples it makes no call."""

    def __call__(self, context: Context) -> Reply:
        shown = [e for e in context.examples if e.calls]
        if not shown:
            return Reply(text="How can I help?")
        words = _words(_request_text(context.proper))

        def similarity(example: Example) -> float:
            other = _words(example.request)
            return len(words & other) / (len(words | other) or 1)

        best = max(shown, key=similarity)
        step = min(_position(context.proper), len(best.calls) - 1)
        return Reply(call=best.calls[step])


class HurtByLongContext:
    """The right answer while the whole context is at most ``limit`` characters; no call beyond."""

    def __init__(self, oracle: dict[str, tuple[str, dict[str, Any]]], limit: int) -> None:
        self.oracle = oracle
        self.limit = limit

    def __call__(self, context: Context) -> Reply:
        key = conversation_key(context.proper)
        if context.chars <= self.limit and key in self.oracle:
            return Reply(call=self.oracle[key])
        return Reply(text="Sorry, I lost track.")


class Coin:
    """The right answer with probability ``cold`` without past examples and ``warm`` with them;
    each request draws its own coin, seeded by ``seed`` and the request."""

    def __init__(
        self, oracle: dict[str, tuple[str, dict[str, Any]]], cold: float, warm: float, seed: int
    ) -> None:
        self.oracle = oracle
        self.cold = cold
        self.warm = warm
        self.seed = seed

    def __call__(self, context: Context) -> Reply:
        key = conversation_key(context.proper)
        chance = self.warm if context.examples else self.cold
        draw = random.Random(f"{self.seed}:{key}:{bool(context.examples)}").random()
        if draw < chance and key in self.oracle:
            return Reply(call=self.oracle[key])
        return Reply(text="Let me think about that.")


Behaviour = Callable[[Context], Reply]


def _from_anthropic(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Anthropic messages back in OpenAI shape (system, text, tool_use, tool_result)."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if isinstance(system, str) and system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages", []):
        content = message["content"]
        if isinstance(content, str):
            messages.append({"role": message["role"], "content": content})
            continue
        texts = [b["text"] for b in content if b.get("type") == "text"]
        calls = [
            {
                "id": b["id"],
                "type": "function",
                "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
            }
            for b in content
            if b.get("type") == "tool_use"
        ]
        results = [b for b in content if b.get("type") == "tool_result"]
        for result in results:
            inner = result.get("content")
            if isinstance(inner, list):
                inner = "".join(part.get("text", "") for part in inner)
            messages.append({"role": "tool", "tool_call_id": result["tool_use_id"], "content": inner})
        if texts or calls:
            entry: dict[str, Any] = {"role": message["role"], "content": "".join(texts) or None}
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
    return messages


class ModelServer:
    """A fake model on a free loopback port: ``with ModelServer(behaviour) as server: server.base_url``."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests: list[dict[str, Any]] = []
        self.faults: list[int] = []
        self.latency = 0.0
        self._lock = threading.Lock()
        self.app = self._app()
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def _answer(self, messages: list[dict[str, Any]], tools: list[str]) -> Reply:
        return self.behaviour(read_context(messages, tools))

    async def _prelude(self, body: Any) -> JSONResponse | None:
        with self._lock:
            self.requests.append(body)
            fault = self.faults.pop(0) if self.faults else None
        if fault is not None:
            return JSONResponse(
                {"error": {"message": f"fake fault {fault}", "type": "fake"}},
                status_code=fault,
                headers={"retry-after-ms": "10"},
            )
        if self.latency:
            await asyncio.sleep(self.latency)
        return None

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Any:
            body = await request.json()
            refused = await self._prelude(body)
            if refused is not None:
                return refused
            tools = [t["function"]["name"] for t in body.get("tools") or []]
            reply = self._answer(body["messages"], tools)
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if reply.call is not None:
                message["content"] = None
                message["tool_calls"] = [
                    {
                        "id": f"call_{uuid.uuid4().hex[:12]}",
                        "type": "function",
                        "function": {"name": reply.call[0], "arguments": json.dumps(reply.call[1])},
                    }
                ]
            prompt = len(json.dumps(body["messages"])) // 4
            return {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake"),
                "choices": [
                    {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.call else "stop"}
                ],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5},
            }

        @app.post("/v1/messages")
        async def messages(request: Request) -> Any:
            body = await request.json()
            refused = await self._prelude(body)
            if refused is not None:
                return refused
            tools = [t["name"] for t in body.get("tools") or []]
            reply = self._answer(_from_anthropic(body), tools)
            if reply.call is not None:
                content = [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{uuid.uuid4().hex[:12]}",
                        "name": reply.call[0],
                        "input": reply.call[1],
                    }
                ]
            else:
                content = [{"type": "text", "text": reply.text or ""}]
            return {
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "fake"),
                "content": content,
                "stop_reason": "tool_use" if reply.call else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": len(json.dumps(body["messages"])) // 4, "output_tokens": 5},
            }

        return app

    @property
    def root_url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def __enter__(self) -> ModelServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the fake model did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
