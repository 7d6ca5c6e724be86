"""Run a planned evaluation against an endpoint: estimate, ask (or read the results file), score.

``estimate`` is the dry run: how many requests a run would send and how many prompt tokens, with
nothing sent. ``run_eval`` sends what the results file does not hold yet (at most
``max_requests``, ``concurrency`` at a time, each case's cold and warm requests side by side),
then scores every case both of whose answers are there and returns the report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kindling.errors import ConfigError, EndpointError
from kindling.eval.cache import ResultsCache, request_key
from kindling.eval.client import FORMATS, OPENAI, ModelClient, request_body
from kindling.eval.plan import EvalPlan, PlannedCase
from kindling.eval.report import ScoredCase, build_report
from kindling.eval.score import ModelCall, score_answer
from kindling.warmup.tokens import estimate_conversation_tokens, estimate_tokens

__all__ = ["Endpoint", "estimate", "run_eval"]

#: A run stops when its first answers, this many, are all rejections: every request would be.
REFUSED_IN_A_ROW = 3
#: Called with (answers stored so far, requests to send in all) while a run asks the model.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Endpoint:
    """Where the model is and how it is asked (part of every request's key).

    ``temperature`` and ``max_tokens`` left None are not sent: the model's own defaults (OpenAI's
    reasoning models take no other).
    """

    base_url: str
    model: str
    api_format: str = OPENAI
    temperature: float | None = 0.0
    max_tokens: int | None = 1024

    def check(self) -> None:
        """Raise ConfigError for an unusable setting."""
        if self.api_format not in FORMATS:
            raise ConfigError(f"Unknown API format {self.api_format!r}; use openai or anthropic.")
        if not self.base_url.strip():
            raise ConfigError("--base-url is required: the endpoint of the model to evaluate.")
        if not self.model.strip():
            raise ConfigError("--model is required: the model to evaluate.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigError(f"--max-tokens must be 1 or more, not {self.max_tokens}.")

    def body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The request body for ``messages`` offered ``tools``."""
        return request_body(
            self.api_format,
            self.model,
            messages,
            tools,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )

    def key(self, body: dict[str, Any]) -> str:
        """The results-file key of a request ``body``."""
        return request_key({"base_url": self.base_url.rstrip("/"), "format": self.api_format, "body": body})


@dataclass
class _Request:
    key: str
    body: dict[str, Any]
    tokens: int


def _requests(plan: EvalPlan, endpoint: Endpoint) -> list[tuple[PlannedCase, _Request, _Request]]:
    """Every case with its cold and warm request (the same request when nothing was inserted)."""
    tool_tokens: dict[int, int] = {}
    pairs: list[tuple[PlannedCase, _Request, _Request]] = []
    for planned in plan.cases:
        tools_cost = tool_tokens.get(id(planned.tools))
        if tools_cost is None:
            tools_cost = tool_tokens[id(planned.tools)] = estimate_tokens(
                orjson.dumps(planned.tools).decode()
            )
        cold_body = endpoint.body(planned.cold, planned.tools)
        cold = _Request(
            endpoint.key(cold_body), cold_body, estimate_conversation_tokens(planned.cold) + tools_cost
        )
        if planned.warmed:
            warm_body = endpoint.body(planned.warm, planned.tools)
            warm = _Request(
                endpoint.key(warm_body), warm_body, estimate_conversation_tokens(planned.warm) + tools_cost
            )
        else:
            warm = cold
        pairs.append((planned, cold, warm))
    return pairs


def _to_send(
    pairs: list[tuple[PlannedCase, _Request, _Request]], cache: ResultsCache, max_requests: int | None
) -> list[_Request]:
    wanted: dict[str, _Request] = {}
    for _planned, cold, warm in pairs:
        for request in (cold, warm):
            if request.key not in cache and request.key not in wanted:
                wanted[request.key] = request
    chosen = list(wanted.values())
    return chosen if max_requests is None else chosen[:max_requests]


def estimate(
    plan: EvalPlan,
    endpoint: Endpoint,
    *,
    results: str | Path,
    max_requests: int | None = None,
    price_per_mtok: float | None = None,
) -> dict[str, Any]:
    """Return what a run would send: requests and estimated prompt tokens (and cost), sending nothing.

    Requests the results file already answers are counted apart (they cost nothing).
    """
    endpoint.check()
    cache = ResultsCache(results)
    pairs = _requests(plan, endpoint)
    unique = {r.key: r for _p, cold, warm in pairs for r in (cold, warm)}
    send = _to_send(pairs, cache, max_requests)
    tokens = sum(r.tokens for r in send)
    cold_tokens = [cold.tokens for _p, cold, _w in pairs]
    warm_tokens = [warm.tokens for _p, _c, warm in pairs]
    cases = len(pairs)
    data: dict[str, Any] = {
        "cases": cases,
        "warmed_cases": sum(1 for p, _c, _w in pairs if p.warmed),
        "requests": len(unique),
        "cached": sum(1 for key in unique if key in cache),
        "to_send": len(send),
        "left_for_later": len(unique) - sum(1 for key in unique if key in cache) - len(send),
        "prompt_tokens_to_send": tokens,
        "cold_tokens_per_request": round(sum(cold_tokens) / cases, 1) if cases else 0.0,
        "warm_tokens_per_request": round(sum(warm_tokens) / cases, 1) if cases else 0.0,
        "max_requests": max_requests,
        "price_per_mtok": price_per_mtok,
        "cost": None if price_per_mtok is None else round(tokens * price_per_mtok / 1e6, 6),
        "results": str(cache.path),
    }
    data["added_tokens_per_request"] = round(
        data["warm_tokens_per_request"] - data["cold_tokens_per_request"], 1
    )
    return data


async def _ask(
    requests: list[_Request],
    client: ModelClient,
    cache: ResultsCache,
    rejected: dict[str, dict[str, Any]],
    concurrency: int,
    on_answer: Callable[[], None],
) -> None:
    """Ask every request; answers go to ``cache``, rejections to ``rejected`` (never kept: a request
    the endpoint refused costs nothing and is asked again next run)."""
    queue: asyncio.Queue[_Request] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    failure: list[BaseException] = []
    accepted = 0

    async def worker() -> None:
        nonlocal accepted
        while not failure:
            try:
                request = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                answer = await client.complete(request.body)
            except Exception as exc:  # the first failure stops every worker; answers so far are kept
                failure.append(exc)
                return
            if "rejected" in answer:
                rejected[request.key] = answer
                if not accepted and len(rejected) >= REFUSED_IN_A_ROW:
                    failure.append(
                        EndpointError(
                            f"{client.base_url} rejects every request ({answer['rejected']}); check --model, "
                            "and try --sampling default for a model that takes no temperature or max_tokens.",
                            base_url=client.base_url,
                        )
                    )
                    return
            else:
                accepted += 1
                cache.put(request.key, answer)
            on_answer()

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(requests))))))
    finally:
        await client.close()
    if failure:
        raise failure[0]


def _first_call(answer: dict[str, Any]) -> ModelCall | None:
    calls = answer.get("calls") or []
    if not calls:
        return None
    first = calls[0]
    return ModelCall(str(first.get("name") or ""), first.get("arguments"))


def run_eval(
    plan: EvalPlan,
    endpoint: Endpoint,
    *,
    api_key: str,
    results: str | Path,
    concurrency: int = 4,
    max_requests: int | None = None,
    retries: int = 6,
    backoff: float = 1.0,
    timeout: float = 120.0,
    price_per_mtok: float | None = None,
    seed: int = 0,
    on_progress: Progress | None = None,
) -> dict[str, Any]:
    """Ask the model what the results file does not hold, score every answered case, and return
    the report (see ``kindling.eval.report.build_report``).

    Raises ConfigError for bad options, EndpointError when the endpoint refuses the key or the
    model, or keeps failing after ``retries`` (every answer received so far is kept), and
    StoreError when the results file cannot be written.
    """
    endpoint.check()
    if concurrency < 1:
        raise ConfigError(f"--concurrency must be 1 or more, not {concurrency}.")
    if max_requests is not None and max_requests < 0:
        raise ConfigError(f"--max-requests must be 0 or more, not {max_requests}.")
    cache = ResultsCache(results)
    pairs = _requests(plan, endpoint)
    send = _to_send(pairs, cache, max_requests)
    client = ModelClient(
        base_url=endpoint.base_url,
        api_key=api_key,
        api_format=endpoint.api_format,
        retries=retries,
        backoff=backoff,
        timeout=timeout,
    )
    done = 0
    rejected_now: dict[str, dict[str, Any]] = {}

    def answered() -> None:
        nonlocal done
        done += 1
        if on_progress is not None:
            on_progress(done, len(send))

    try:
        if send:
            asyncio.run(_ask(send, client, cache, rejected_now, concurrency, answered))
    finally:
        cache.close()
    scored: list[ScoredCase] = []
    unanswered = rejected = 0
    no_schema = 0
    for planned, cold, warm in pairs:
        cold_answer = cache.get(cold.key) or rejected_now.get(cold.key)
        warm_answer = cache.get(warm.key) or rejected_now.get(warm.key)
        if cold_answer is None or warm_answer is None:
            unanswered += 1
            continue
        if "rejected" in cold_answer or "rejected" in warm_answer:
            rejected += 1
            continue
        case = planned.case
        catalog = plan.catalogs[case.source]
        failures = plan.failures[case.fold]
        cold_scores = score_answer(
            case.kind, case.expected, case.error_class, _first_call(cold_answer), catalog, failures
        )
        warm_scores = score_answer(
            case.kind, case.expected, case.error_class, _first_call(warm_answer), catalog, failures
        )
        no_schema += _schemaless(cold_answer, catalog) + _schemaless(warm_answer, catalog)
        scored.append(
            ScoredCase(
                case=case,
                cold=cold_scores,
                warm=warm_scores,
                warmed=planned.warmed,
                cold_tokens=cold.tokens,
                warm_tokens=warm.tokens,
                cold_usage=cold_answer.get("prompt_tokens"),
                warm_usage=warm_answer.get("prompt_tokens"),
            )
        )
    return build_report(
        scored,
        plan=plan,
        endpoint={"base_url": endpoint.base_url, "model": endpoint.model, "format": endpoint.api_format},
        requests={
            "sent_this_run": client.stats.sent,
            "retried": client.stats.retried,
            "rejected": client.stats.rejected,
            "answers_in_results_file": len(cache),
            "malformed_lines_in_results_file": cache.malformed,
            "results": str(cache.path),
        },
        unanswered=unanswered,
        rejected=rejected,
        no_schema=no_schema,
        price_per_mtok=price_per_mtok,
        seed=seed,
    )


def _schemaless(answer: dict[str, Any], catalog: Any) -> int:
    call = _first_call(answer)
    return int(call is not None and catalog.schemas.get(call.name, 0) is None)
