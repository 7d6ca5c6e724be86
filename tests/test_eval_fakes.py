"""``kindling eval`` end to end against fake models on loopback, through the official SDKs.

Three behaviours give the three verdicts (a model that ignores its context, one that copies the most
similar past example, one that long contexts hurt); a seeded coin with known odds checks that the
intervals cover the true difference; faults check retries, rejections and a refused key; the dry
run's figures are checked against what the fake then receives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_support import oracle_of, write_sessions
from fake_models import Coin, CopiesExamples, HurtByLongContext, IgnoresContext, ModelServer
from kindling.errors import EndpointError
from kindling.eval import Endpoint, EvalOptions, EvalPlan, estimate, plan_eval, run_eval
from kindling.eval.score import CALL
from kindling.warmup.tokens import estimate_conversation_tokens, estimate_tokens


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalPlan]:
    source = write_sessions(tmp_path_factory.mktemp("sessions") / "travel.jsonl")
    with plan_eval([source], EvalOptions(min_messages=1)) as built:
        yield built


@pytest.fixture(scope="module")
def small_plan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EvalPlan]:
    """Two runs of every task, one step each, no failures: about thirty cases, for repeated runs."""
    source = write_sessions(tmp_path_factory.mktemp("small") / "travel.jsonl", runs=2, seed=5, failures=False)
    with plan_eval([source], EvalOptions(min_messages=1, steps=1)) as built:
        yield built


def _run(plan: EvalPlan, server: ModelServer, results: Path, **options: Any) -> dict[str, Any]:
    endpoint = Endpoint(
        options.pop("base_url", server.base_url), "fake-model", options.pop("api_format", "openai")
    )
    options.setdefault("concurrency", 4)
    return run_eval(plan, endpoint, api_key="test-key", results=results, backoff=0.01, **options)


def _metric(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(row for row in report["metrics"] if row["metric"] == name)


def test_the_plan_has_warmed_calls_and_failed_calls(plan: EvalPlan) -> None:
    kinds = {planned.case.kind for planned in plan.cases}
    assert kinds == {"call", "failed"}
    assert all(planned.warmed for planned in plan.cases)
    assert plan.counts["held_out_sessions"] == 45 and plan.counts["tasks"] == 15


def test_a_model_that_ignores_its_context_is_not_distinguishable(plan: EvalPlan, tmp_path: Path) -> None:
    with ModelServer(IgnoresContext(oracle_of(plan))) as server:
        report = _run(plan, server, tmp_path / "r.jsonl")
    assert report["verdict"]["outcome"] == "not distinguishable"
    assert report["verdict"]["line"].startswith("Cold and warm are not distinguishable at this sample size")
    good = _metric(report, "good")
    assert good["cold"] == good["warm"] and 0.2 < good["cold"] < 0.9
    assert good["ci_low"] == good["ci_high"] == 0.0
    assert report["cases"]["scored"] == len(plan.cases)
    assert report["requests"]["sent_this_run"] == len(server.requests) == 2 * len(plan.cases)
    # The fake counts a quarter of the characters as tokens: the warm-up's are measured, not guessed.
    assert report["tokens"]["from"] == "usage" and report["tokens"]["added_per_request"] > 100


def test_a_model_that_copies_past_examples_is_better_warm(plan: EvalPlan, tmp_path: Path) -> None:
    with ModelServer(CopiesExamples()) as server:
        report = _run(plan, server, tmp_path / "r.jsonl", price_per_mtok=2.0)
    assert report["verdict"]["outcome"] == "better", report["verdict"]
    assert report["verdict"]["line"].startswith("Warm is better: right tool, or failure avoided")
    right_tool = _metric(report, "right_tool")
    assert right_tool["cold"] == 0.0 and right_tool["warm"] > 0.3 and right_tool["ci_low"] > 0
    no_call = _metric(report, "no_call")
    assert no_call["cold"] == 1.0 and no_call["warm"] == 0.0 and no_call["outcome"] == "better"
    tokens = report["tokens"]
    assert tokens["added_cost_per_request"] == pytest.approx(tokens["added_per_request"] * 2.0 / 1e6)
    tools = {row["tool"]: row for row in report["tools"]}
    assert set(tools) <= {
        "get_weather",
        "get_forecast",
        "convert_currency",
        "find_restaurant",
        "search_flights",
        "book_flight",
    }
    assert sum(row["cases"] for row in tools.values()) == report["cases"]["scored"]
    assert report["schemas"] == {"defined": [], "inferred": sorted(tools), "none": []}


def test_a_model_hurt_by_long_contexts_is_worse_warm(plan: EvalPlan, tmp_path: Path) -> None:
    longest_cold = max(len(json.dumps(planned.cold)) for planned in plan.cases)
    with ModelServer(HurtByLongContext(oracle_of(plan), limit=longest_cold + 50)) as server:
        report = _run(plan, server, tmp_path / "r.jsonl")
    assert report["verdict"]["outcome"] == "worse", report["verdict"]
    assert report["verdict"]["line"].startswith("Warm is worse")
    assert _metric(report, "right_call")["cold"] == 1.0
    assert "no call where one was due" in report["verdict"]["line"]


def test_the_interval_covers_the_true_difference_over_seeded_runs(
    small_plan: EvalPlan, tmp_path: Path
) -> None:
    # The coin is right with 0.4 cold and 0.7 warm at every step (every one is warmed), so warm
    # minus cold is 0.3 in truth; each run draws its coins afresh.
    plan = small_plan
    assert all(p.warmed and p.case.kind == CALL for p in plan.cases) and len(plan.cases) >= 25
    cold, warm = 0.4, 0.7
    coin = Coin(oracle_of(plan), cold, warm, seed=0)
    covered = 0
    differences = []
    runs = 10
    with ModelServer(coin) as server:
        for seed in range(runs):
            coin.seed = seed
            report = _run(plan, server, tmp_path / f"r{seed}.jsonl", seed=seed)
            row = _metric(report, "good")
            assert row == {**_metric(report, "right_tool"), "metric": "good", "label": row["label"]}
            covered += row["ci_low"] <= warm - cold <= row["ci_high"]
            differences.append(row["difference"])
    # 95% intervals: missing more than two runs of ten happens about once in a hundred.
    assert covered >= runs - 2, (covered, differences)
    assert abs(sum(differences) / runs - (warm - cold)) < 0.08, differences


def test_rate_limits_and_server_errors_are_retried(plan: EvalPlan, tmp_path: Path) -> None:
    with ModelServer(CopiesExamples()) as server:
        server.faults = [429, 503, 429]
        report = _run(plan, server, tmp_path / "r.jsonl")
    assert report["requests"]["retried"] == 3
    assert len(server.requests) == 2 * len(plan.cases) + 3
    assert report["cases"]["scored"] == len(plan.cases) and report["verdict"]["outcome"] == "better"


def test_a_rejected_request_is_counted_and_asked_again_and_a_refused_key_stops_the_run(
    plan: EvalPlan, tmp_path: Path
) -> None:
    results = tmp_path / "r.jsonl"
    with ModelServer(CopiesExamples()) as server:
        server.faults = [400]
        report = _run(plan, server, results, max_requests=10)
        assert report["cases"]["rejected"] == 1 and report["requests"]["rejected"] == 1
        assert report["cases"]["unanswered"] > 0 and "wait for answers" in report["verdict"]["line"]
        assert len(results.read_text().splitlines()) == 9  # a rejection is not kept
        server.faults = [401]
        with pytest.raises(EndpointError, match="HTTP 401"):
            _run(plan, server, results)
        kept = len(results.read_text().splitlines())
        assert 9 <= kept <= 12  # the first run's answers, and those in flight when the key was refused
        finished = _run(plan, server, results)
    assert finished["cases"]["rejected"] == 0 and finished["cases"]["unanswered"] == 0
    assert finished["cases"]["scored"] == len(plan.cases)


def test_an_endpoint_that_rejects_everything_stops_the_run(plan: EvalPlan, tmp_path: Path) -> None:
    with ModelServer(CopiesExamples()) as server:
        server.faults = [400] * 50
        with pytest.raises(EndpointError, match=r"rejects every request.*--sampling default"):
            _run(plan, server, tmp_path / "r.jsonl", concurrency=1)
        assert len(server.requests) == 3
    assert not (tmp_path / "r.jsonl").exists()


def test_default_sampling_sends_neither_temperature_nor_max_tokens(plan: EvalPlan, tmp_path: Path) -> None:
    with ModelServer(CopiesExamples()) as server:
        endpoint = Endpoint(server.base_url, "fake-model", temperature=None, max_tokens=None)
        run_eval(plan, endpoint, api_key="k", results=tmp_path / "r.jsonl", max_requests=2)
        assert len(server.requests) == 2
        assert all("temperature" not in body and "max_tokens" not in body for body in server.requests)


def test_the_dry_run_counts_what_a_run_then_sends(plan: EvalPlan, tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    with ModelServer(CopiesExamples()) as server:
        endpoint = Endpoint(server.base_url, "fake-model")
        capped = estimate(plan, endpoint, results=results, max_requests=7)
        figures = estimate(plan, endpoint, results=results, price_per_mtok=3.0)
        assert server.requests == []  # a dry run sends nothing
        assert capped["to_send"] == 7 and capped["left_for_later"] == figures["requests"] - 7
        assert figures["requests"] == figures["to_send"] == 2 * len(plan.cases) and figures["cached"] == 0
        _run(plan, server, results)
        assert len(server.requests) == figures["to_send"]
        tools = server.requests[0]["tools"]
        sent_tokens = sum(
            estimate_conversation_tokens(body["messages"])
            + estimate_tokens(json.dumps(tools, separators=(",", ":")))
            for body in server.requests
        )
        assert figures["prompt_tokens_to_send"] == sent_tokens
        assert figures["cost"] == pytest.approx(sent_tokens * 3.0 / 1e6)
        again = estimate(plan, endpoint, results=results)
        assert again["to_send"] == 0 and again["cached"] == figures["requests"]
        _run(plan, server, results)
        assert len(server.requests) == figures["to_send"]  # a re-run costs nothing


def test_anthropic_format_through_the_anthropic_sdk(plan: EvalPlan, tmp_path: Path) -> None:
    with ModelServer(CopiesExamples()) as server:
        report = _run(plan, server, tmp_path / "r.jsonl", base_url=server.root_url, api_format="anthropic")
    assert len(server.requests) == 2 * len(plan.cases)
    first = server.requests[0]
    assert "system" in first and all(m["role"] in ("user", "assistant") for m in first["messages"])
    assert {"name", "input_schema"} <= set(first["tools"][0])
    assert report["endpoint"]["format"] == "anthropic" and report["verdict"]["outcome"] == "better"
