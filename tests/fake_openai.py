"""A fake OpenAI-compatible server: a real HTTP server on loopback for tests and benchmarks.

It replays a script of chat-completion responses in order and records every request it gets::

    server = FakeOpenAI()
    server.start()
    server.script = [tool_call("memory", {"action": "add", ...}), text("Done.")]
    ... point an OpenAI client at server.base_url ...
    server.requests[0]["body"]["messages"]

Script items are either a response built by ``text``/``tool_call``/``tool_calls`` or a fault:
``{"fault": "status", "status": 500}``, ``{"fault": "delay", "seconds": 5}`` (then the next item),
``{"fault": "wait", "until": threading.Event()}`` (the request waits until the test sets the event,
at most 60 s, then gets the next item), ``{"fault": "malformed"}`` (a 200 whose body is not JSON). A status fault may carry ``"headers"``
(e.g. ``{"retry-after": "0.3"}``); every POST is recorded with its arrival ``"time"`` (monotonic). When the script is exhausted the
server answers ``default`` (a plain "Done." reply unless changed).

A chat request with ``"stream": true`` (Hermes's agent loop always streams) gets the scripted reply
as server-sent events: content in pieces, each tool call's arguments in pieces, the finish reason,
usage when ``stream_options.include_usage`` asks, then ``data: [DONE]``, sent with chunked encoding
as written. ``chunk_delay`` (seconds between events) and ``latency`` (seconds before any chat reply)
model a slow upstream (the ``X-Fake-Latency`` and ``X-Fake-Chunk-Delay`` request headers set them
per request); an item may carry its own ``"chunk_delay"`` and a ``"hold"``
(``threading.Event``) the stream waits on after its first event. Every POST record keeps the body's
exact bytes under ``"raw"``; ``responses`` keeps the exact bytes of every chat reply sent.

It also serves ``GET /v1/models`` from ``models`` (a list of model entries, which may carry
``context_length``) and Ollama's ``POST /api/show`` from ``ollama_show`` (model -> JSON body).

The same script answers Anthropic's Messages API (``POST /v1/messages``, what Hermes's
``anthropic_messages`` mode calls): the reply's text and tool calls become ``text`` and
``tool_use`` blocks, as one JSON message or, with ``"stream": true``, as Anthropic's events
(``message_start``, the blocks' start/delta/stop, ``message_delta`` with the stop reason,
``message_stop``). ``message_requests()`` returns those requests' bodies.

And OpenAI's Responses API (``POST /v1/responses``): the reply's text becomes a ``message`` output
item with an ``output_text`` part, each tool call a ``function_call`` item, and an item's
``"reasoning"`` (a string) a ``reasoning`` item first; as one response object or, with
``"stream": true``, as its events (``response.created``, each item's ``response.output_item.added``,
its text or arguments deltas and ``response.output_item.done``, then ``response.completed`` with
the whole response). ``response_requests()`` returns those requests' bodies.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def text(content: str) -> dict[str, Any]:
    """A scripted assistant reply with text only."""
    return {"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}


def tool_calls(*calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    """A scripted assistant reply that calls one or more tools: (name, arguments[, id])."""
    rendered = []
    for call in calls:
        name, arguments = call[0], call[1]
        call_id = call[2] if len(call) > 2 else f"call_{uuid.uuid4().hex[:12]}"  # type: ignore[misc]
        rendered.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        )
    return {
        "message": {"role": "assistant", "content": None, "tool_calls": rendered},
        "finish_reason": "tool_calls",
    }


def tool_call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """A scripted assistant reply that calls one tool."""
    return tool_calls((name, arguments, call_id) if call_id else (name, arguments))


class FakeOpenAI:
    """A threaded HTTP server on 127.0.0.1 speaking enough of the OpenAI API for kindling's tests."""

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.default: dict[str, Any] = text("Done.")
        self.requests: list[dict[str, Any]] = []
        self.responses: list[bytes] = []  # the exact body of every chat reply sent (streams: all events)
        self.models: list[dict[str, Any]] = [{"id": "fake-model", "object": "model", "owned_by": "kindling"}]
        self.ollama_show: dict[str, dict[str, Any]] = {}
        self.latency = 0.0
        self.chunk_delay = 0.0
        self.record = True
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (Ollama-style clients append ``/api/...``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.root_url}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of every chat-completion request received, in order."""
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def message_requests(self) -> list[dict[str, Any]]:
        """The bodies of every Anthropic Messages request received, in order."""
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].split("?")[0].endswith("/v1/messages")]

    def response_requests(self) -> list[dict[str, Any]]:
        """The bodies of every Responses API request received, in order."""
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].split("?")[0].endswith("/v1/responses")]

    def start(self, port: int = 0) -> None:
        """Serve on 127.0.0.1:``port`` (0: a free port) on a background thread."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, the body waits for the client's
            # delayed ACK (~40 ms per call on Linux).
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _read_body(self) -> tuple[Any, bytes]:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return (json.loads(raw) if raw else None), raw
                except ValueError:
                    return raw.decode("utf-8", "replace"), raw

            def _stream(
                self, item: dict[str, Any], model: str, body: dict[str, Any], api: str = "chat"
            ) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                delay = float(
                    item.get("chunk_delay", self.headers.get("X-Fake-Chunk-Delay") or fake.chunk_delay)
                )
                hold = item.get("hold")
                if api == "messages":
                    events = fake._anthropic_events(item, model)
                elif api == "responses":
                    events = fake._response_events(item, model, body)
                else:
                    events = fake._events(item, model, body)
                if fake.record:
                    with fake._lock:
                        fake.responses.append("".join(events).encode())
                try:
                    for number, event in enumerate(events):
                        if number and delay:
                            time.sleep(delay)
                        data = event.encode()
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                        if number == 0 and hold is not None:
                            hold.wait(30)
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _send(
                self,
                status: int,
                body: bytes,
                content_type: str = "application/json",
                headers: dict[str, str] | None = None,
            ) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def do_GET(self) -> None:
                with fake._lock:
                    fake.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers)})
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": fake.models}).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                body, raw = self._read_body()
                if fake.record:
                    with fake._lock:
                        fake.requests.append(
                            {
                                "method": "POST",
                                "path": self.path,
                                "headers": dict(self.headers),
                                "body": body,
                                "raw": raw,
                                "time": time.monotonic(),
                            }
                        )
                if self.path.startswith("/api/show"):
                    model = body.get("model") or body.get("name") if isinstance(body, dict) else None
                    if model in fake.ollama_show:
                        self._send(200, json.dumps(fake.ollama_show[model]).encode())
                    else:
                        self._send(404, b'{"error": "model not found"}')
                    return
                path = self.path.split("?")[0].rstrip("/")
                api = (
                    "messages"
                    if path.endswith("/v1/messages")
                    else "responses"
                    if path.endswith("/v1/responses")
                    else "chat"
                )
                if api == "chat" and not path.endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                # A client (a benchmark) may ask for a slower upstream per request.
                latency = float(self.headers.get("X-Fake-Latency") or fake.latency)
                if latency:
                    time.sleep(latency)
                item = fake._next_item()
                while item.get("fault") in ("delay", "wait"):
                    if item["fault"] == "wait":
                        item["until"].wait(60)
                    else:
                        time.sleep(float(item.get("seconds", 1)))
                    item = fake._next_item()
                if item.get("fault") == "status":
                    status = int(item.get("status", 500))
                    self._send(
                        status,
                        json.dumps({"error": {"message": f"scripted {status}"}}).encode(),
                        headers=item.get("headers"),
                    )
                    return
                if item.get("fault") == "malformed":
                    self._send(200, b"{this is not json")
                    return
                model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
                if isinstance(body, dict) and body.get("stream"):
                    self._stream(item, model, body, api)
                    return
                if api == "messages":
                    answer = fake._anthropic_message(item, model)
                elif api == "responses":
                    answer = fake._response(item, model, body)
                else:
                    answer = fake._completion(item, model)
                reply = json.dumps(answer).encode()
                if fake.record:
                    with fake._lock:
                        fake.responses.append(reply)
                self._send(200, reply)

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        # A short poll interval makes stop() return in ~50 ms instead of serve_forever's 0.5 s.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _next_item(self) -> dict[str, Any]:
        with self._lock:
            return self.script.pop(0) if self.script else self.default

    @staticmethod
    def _events(item: dict[str, Any], model: str, body: dict[str, Any]) -> list[str]:
        """The scripted reply as chat-completion chunk events, ending with ``[DONE]``."""
        chunk_id = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        created = int(time.time())

        def event(delta: dict[str, Any], finish: str | None = None) -> str:
            chunk = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(chunk)}\n\n"

        message = item["message"]
        events = [event({"role": "assistant", "content": ""})]
        content = message.get("content") or ""
        for start in range(0, len(content), 8):
            events.append(event({"content": content[start : start + 8]}))
        for index, call in enumerate(message.get("tool_calls") or ()):
            function = call["function"]
            events.append(
                event(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": function["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            arguments = function["arguments"]
            for start in range(0, len(arguments), 10):
                piece = arguments[start : start + 10]
                events.append(event({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        events.append(event({}, item.get("finish_reason", "stop")))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = item.get("usage", {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
            chunk = {"id": chunk_id, "object": "chat.completion.chunk", "created": created, "model": model}
            events.append(f"data: {json.dumps({**chunk, 'choices': [], 'usage': usage})}\n\n")
        events.append("data: [DONE]\n\n")
        return events

    @staticmethod
    def _anthropic_message(item: dict[str, Any], model: str) -> dict[str, Any]:
        """The scripted reply as an Anthropic message: text and tool_use blocks, a stop reason."""
        message = item["message"]
        blocks: list[dict[str, Any]] = []
        if message.get("content"):
            blocks.append({"type": "text", "text": message["content"]})
        for call in message.get("tool_calls") or ():
            function = call["function"]
            blocks.append(
                {
                    "type": "tool_use",
                    "id": "toolu_" + call["id"].removeprefix("call_"),
                    "name": function["name"],
                    "input": json.loads(function["arguments"] or "{}"),
                }
            )
        return {
            "id": f"msg_{uuid.uuid4().hex[:16]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    @staticmethod
    def _anthropic_events(item: dict[str, Any], model: str) -> list[str]:
        """The scripted reply as Anthropic's stream: each block started, filled in pieces, stopped."""
        message = FakeOpenAI._anthropic_message(item, model)

        def event(kind: str, data: dict[str, Any]) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        events = [event("message_start", {"message": start})]
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                events.append(
                    event("content_block_start", {"index": index, "content_block": {**block, "text": ""}})
                )
                for at in range(0, len(block["text"]), 8):
                    delta = {"type": "text_delta", "text": block["text"][at : at + 8]}
                    events.append(event("content_block_delta", {"index": index, "delta": delta}))
            else:
                events.append(
                    event("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
                )
                arguments = json.dumps(block["input"])
                for at in range(0, len(arguments), 10):
                    delta = {"type": "input_json_delta", "partial_json": arguments[at : at + 10]}
                    events.append(event("content_block_delta", {"index": index, "delta": delta}))
            events.append(event("content_block_stop", {"index": index}))
        stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
        events.append(event("message_delta", {"delta": stop, "usage": {"output_tokens": 5}}))
        events.append(event("message_stop", {}))
        return events

    @staticmethod
    def _response(item: dict[str, Any], model: str, body: dict[str, Any]) -> dict[str, Any]:
        """The scripted reply as a Responses API response: its output items, completed."""
        message = item["message"]
        output: list[dict[str, Any]] = []
        if item.get("reasoning"):
            output.append(
                {
                    "type": "reasoning",
                    "id": f"rs_{uuid.uuid4().hex[:16]}",
                    "summary": [{"type": "summary_text", "text": item["reasoning"]}],
                    "encrypted_content": "gAAAA-opaque",
                }
            )
        if message.get("content"):
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:16]}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": message["content"], "annotations": []}],
                }
            )
        for call in message.get("tool_calls") or ():
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{uuid.uuid4().hex[:16]}",
                    "call_id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                    "status": "completed",
                }
            )
        return {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": model,
            "output": output,
            "instructions": body.get("instructions"),
            "previous_response_id": body.get("previous_response_id"),
            "parallel_tool_calls": True,
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools", []),
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            },
        }

    @staticmethod
    def _response_events(item: dict[str, Any], model: str, body: dict[str, Any]) -> list[str]:
        """The scripted reply as the Responses API's stream: the items added, filled in, done; completed."""
        response = FakeOpenAI._response(item, model, body)
        number = iter(range(1_000_000))

        def event(kind: str, data: dict[str, Any]) -> str:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': next(number), **data})}\n\n"

        started = {**response, "status": "in_progress", "output": [], "usage": None}
        events = [event("response.created", {"response": started})]
        for index, output in enumerate(response["output"]):
            at = {"output_index": index, "item_id": output["id"]}
            if output["type"] == "message":
                events.append(
                    event(
                        "response.output_item.added",
                        {"output_index": index, "item": {**output, "status": "in_progress", "content": []}},
                    )
                )
                part = {"type": "output_text", "text": "", "annotations": []}
                events.append(event("response.content_part.added", {**at, "content_index": 0, "part": part}))
                text = output["content"][0]["text"]
                for start in range(0, len(text), 8):
                    piece = {"content_index": 0, "delta": text[start : start + 8], "logprobs": []}
                    events.append(event("response.output_text.delta", {**at, **piece}))
                events.append(
                    event(
                        "response.output_text.done", {**at, "content_index": 0, "text": text, "logprobs": []}
                    )
                )
                events.append(
                    event(
                        "response.content_part.done", {**at, "content_index": 0, "part": output["content"][0]}
                    )
                )
            elif output["type"] == "function_call":
                events.append(
                    event(
                        "response.output_item.added",
                        {"output_index": index, "item": {**output, "status": "in_progress", "arguments": ""}},
                    )
                )
                arguments = output["arguments"]
                for start in range(0, len(arguments), 10):
                    events.append(
                        event(
                            "response.function_call_arguments.delta",
                            {**at, "delta": arguments[start : start + 10]},
                        )
                    )
                events.append(event("response.function_call_arguments.done", {**at, "arguments": arguments}))
            else:
                events.append(event("response.output_item.added", {"output_index": index, "item": output}))
            events.append(event("response.output_item.done", {"output_index": index, "item": output}))
        events.append(event("response.completed", {"response": response}))
        return events

    @staticmethod
    def _completion(item: dict[str, Any], model: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": item["message"], "finish_reason": item.get("finish_reason", "stop")}
            ],
            "usage": item.get("usage", {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
        }
