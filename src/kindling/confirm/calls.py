"""The requests the daemon answers at its edge: what such a call reads, what it answers, and which
routes they are, derived from the router's own routes.

Submit, approve and deny are what every agent and approver sends on each request. Their routes are
declared once, in ``routes/confirmations.py``, with ``@edge(answer)``: the daemon's entry
(``app.ConfirmApp``) and its server's direct protocol (``kindling.serving``) answer them with
``answer`` straight from the ASGI scope or the connection, without the framework's routing, request
or response objects, and the route itself (reached only when the app is mounted under a prefix)
answers through the same ``answer``, so there is one way each is answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple, TypeVar

from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.convertors import StringConvertor
from starlette.routing import BaseRoute

from kindling.edge import Head, read_head
from kindling.observe.logs import LogContext

# The attribute an endpoint answered at the edge carries: its answer.
_EDGE_ANSWER = "kindling_edge_answer"


class Call:
    """What submit, approve and deny read from a request: the app's state, its head and its body.

    ``body`` returns the whole body, or raises 413 past the daemon's limit. ``log`` is the request's
    log context (its tenant is set once the caller is known) and ``span`` its trace span, if any.
    """

    __slots__ = ("authorization", "body", "idempotency_key", "log", "span", "state")

    def __init__(
        self,
        state: Any,
        head: Head,
        body: Callable[[], Awaitable[bytes]],
        log: LogContext | None = None,
        span: Any = None,
    ) -> None:
        self.state = state
        self.authorization = head.authorization
        self.idempotency_key = head.idempotency_key
        self.body = body
        self.log = log
        self.span = span

    def caller(self, name: str) -> None:
        """Record who called (a token's name) for the request's log lines."""
        if self.log is not None:
            self.log.tenant = name

    def trace(self, *, session_id: str | None = None, request_id: str | None = None) -> None:
        """Add the session and confirmation request ids to the request's span (never any content)."""
        span = self.span
        if span is not None:
            if session_id:
                span.set_attribute("kindling.session_id", session_id)
            if request_id:
                span.set_attribute("kindling.confirm.request_id", request_id)


class Answer(NamedTuple):
    """A JSON answer of submit, approve or deny: status, encoded body and any extra headers."""

    status: int
    body: bytes
    headers: dict[str, str] | None = None


AnswerFunction = Callable[..., Awaitable[Answer]]
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def edge(answer: AnswerFunction) -> Callable[[Endpoint], Endpoint]:
    """Mark a ``POST`` route's endpoint as answered at the daemon's edge by ``answer(call, **path
    params)``; the endpoint should return ``answer_route(request, answer, ...)``."""

    def mark(endpoint: Endpoint) -> Endpoint:
        setattr(endpoint, _EDGE_ANSWER, answer)
        return endpoint

    return mark


class Found(NamedTuple):
    """A request the edge answers: its route's template, its answer and its path parameters."""

    template: str
    answer: AnswerFunction
    params: dict[str, Any]


class _Segments(NamedTuple):
    # A route whose parameters are all plain strings, matched segment by segment: the literal
    # segments by position, each parameter one non-empty segment (what the router's ``[^/]+`` takes).
    template: str
    answer: AnswerFunction
    literals: tuple[tuple[int, str], ...]
    params: tuple[tuple[int, str], ...]


class EdgeRoutes:
    """The ``POST`` routes marked with ``@edge``, matched as the router matches them.

    A path without parameters is a dict look-up; a route whose parameters are all strings is matched
    segment by segment (as its pattern would, a few times faster); any other by the router's own
    compiled pattern.
    """

    def __init__(self, routes: Iterable[BaseRoute]) -> None:
        self.fixed: dict[str, Found] = {}
        self.by_length: dict[int, list[_Segments]] = {}
        self.patterns: list[tuple[Any, str, AnswerFunction, dict[str, Any]]] = []
        for route in routes:
            answer = getattr(getattr(route, "endpoint", None), _EDGE_ANSWER, None)
            if answer is None or not isinstance(route, APIRoute):
                continue
            if route.methods != {"POST"}:
                raise ValueError(f"Only POST routes are answered at the edge, not {route.path}.")
            if not route.param_convertors:
                self.fixed[route.path] = Found(route.path, answer, {})
                continue
            segments = _segments(route, answer)
            if segments is not None:
                self.by_length.setdefault(route.path.count("/") + 1, []).append(segments)
            else:
                self.patterns.append((route.path_regex, route.path, answer, route.param_convertors))

    def find(self, path: str) -> Found | None:
        """Return what answers ``POST path`` at the edge, or None (the app answers it)."""
        found = self.fixed.get(path)
        if found is not None:
            return found
        parts = path.split("/")
        for route in self.by_length.get(len(parts), ()):
            # Plain loops: generator expressions cost more than the comparisons on this path.
            for i, text in route.literals:
                if parts[i] != text:
                    break
            else:
                params = {}
                for i, name in route.params:
                    if not parts[i]:
                        break
                    params[name] = parts[i]
                else:
                    return Found(route.template, route.answer, params)
        for regex, template, answer, convertors in self.patterns:
            match = regex.match(path)
            if match is not None:
                params = {name: convertors[name].convert(value) for name, value in match.groupdict().items()}
                return Found(template, answer, params)
        return None

    def templates(self) -> list[str]:
        """Return the templates of the routes answered at the edge."""
        by_segments = (route.template for routes in self.by_length.values() for route in routes)
        return [*self.fixed, *by_segments, *(template for _, template, _, _ in self.patterns)]


def _segments(route: APIRoute, answer: AnswerFunction) -> _Segments | None:
    # None unless every parameter is a plain string taking a whole segment ("/confirm/{id}/deny").
    if not all(isinstance(c, StringConvertor) for c in route.param_convertors.values()):
        return None
    literals, params = [], []
    for i, segment in enumerate(route.path.split("/")):
        if segment.startswith("{") and segment.endswith("}"):
            name = segment[1:-1].split(":", 1)[0]
            if name not in route.param_convertors:
                return None
            params.append((i, name))
        elif "{" in segment or "}" in segment:
            return None
        else:
            literals.append((i, segment))
    return _Segments(route.path, answer, tuple(literals), tuple(params))


async def answer_route(request: Request, answer: AnswerFunction, **params: Any) -> Response:
    """Answer an edge route through the framework (the app mounted under a prefix): the same head,
    body limit and ``answer`` as at the edge."""
    limit = request.app.state.body_limit
    call = Call(request.app.state, read_head(request.scope["headers"]), lambda: limit.read(request.receive))
    result = await answer(call, **params)
    return Response(result.body, result.status, result.headers, media_type="application/json")
