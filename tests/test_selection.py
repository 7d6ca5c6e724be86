"""Selection by past tasks: similar episodes and per-tool evidence decide tools and examples."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.mining.model import Example
from kindling.templates import JsonDirStore, Template
from kindling.templates.model import Episode, EpisodeStep
from kindling.warmup import (
    choose_template,
    evidence,
    inject,
    to_anthropic,
    validate_conversation,
    warm,
    warm_conversation,
)
from kindling.warmup.evidence import choose_tools, words
from kindling.warmup.plan import plan_examples

# Kinds of past task: what users asked, and the tools such a task used.
KINDS: dict[str, tuple[list[str], list[str]]] = {
    "refund": (
        [
            "I want a refund for the broken kettle",
            "please refund my damaged blender",
            "refund the cracked mug",
        ],
        ["lookup_customer", "get_order", "issue_refund"],
    ),
    "address": (
        [
            "change the shipping address of my order",
            "update my delivery address please",
            "ship to my new address",
        ],
        ["lookup_customer", "get_order", "change_address"],
    ),
    "catalog": (
        [
            "which laptops do you sell in silver",
            "show me desk lamps in stock",
            "what colours does the chair come in",
        ],
        ["search_catalog", "get_product"],
    ),
}
ALL_TOOLS = sorted({t for _texts, tools in KINDS.values() for t in tools} | {"escalate", "send_survey"})


def shop_template(repeat: int = 3, name: str = "shop") -> Template:
    examples: list[Example] = []
    episodes: list[Episode] = []
    for kind, (texts, tools) in KINDS.items():
        for r in range(repeat):
            for number, text in enumerate(texts):
                session = f"{kind}-{r}-{number}"
                steps = []
                for position, tool in enumerate(tools, start=1):
                    examples.append(
                        Example(
                            tool_name=tool,
                            arguments={"n": f"{session}-{position}"},
                            result=f"{tool} result for {session}",
                            session_id=session,
                            position=position * 2,
                        )
                    )
                    steps.append(EpisodeStep(tool_name=tool, position=position * 2))
                episodes.append(Episode(session_id=session, opening=f"{text} (case {r})", steps=steps))
    # Rare tools that no episode of these kinds used.
    examples.append(Example(tool_name="escalate", result="escalated", session_id="x", position=1))
    examples.append(Example(tool_name="send_survey", result="sent", session_id="y", position=1))
    return Template(name=name, examples=examples, episodes=episodes)


def test_a_task_gets_the_tools_its_kind_of_past_task_used_not_every_tool() -> None:
    template = shop_template()
    result = warm_conversation(template, "I would like a refund for my broken toaster", max_examples=8)
    assert set(result.tools) == {"lookup_customer", "get_order", "issue_refund"}
    catalog = warm_conversation(template, "do you sell silver desk lamps", max_examples=8)
    assert set(catalog.tools) == {"search_catalog", "get_product"}  # two tools, not eight
    # The examples come from the most similar past tasks, and the result says which and why.
    assert catalog.past_tasks and all(p["session_id"].startswith("catalog") for p in catalog.past_tasks)
    why = catalog.as_dict()["why"]
    assert why["past_tasks"] == catalog.past_tasks
    assert why["evidence"]["search_catalog"] > why["evidence"]["issue_refund"]
    assert "past tasks" in why["tools"]


def test_nothing_similar_falls_back_to_what_most_past_tasks_used() -> None:
    template = shop_template()
    plan = plan_examples(template, "zzz qqq", max_examples=8)
    assert plan.tools  # something sensible, not nothing
    assert set(plan.tools) <= {
        "lookup_customer",
        "get_order",
        "issue_refund",
        "change_address",
        "search_catalog",
        "get_product",
    }
    assert "no past task is similar enough" in plan.reason and plan.general
    # The general list: what served all past tasks best, the same whatever the unknown task says.
    assert plan.tools == plan_examples(template, "qqq zzz www", max_examples=8).tools
    assert plan.past_tasks == []  # nothing was drawn from a past task that does not resemble this one


def test_choose_tools_shows_only_what_the_evidence_supports() -> None:
    sure_pair = choose_tools({"a": 0.95, "b": 0.9, "c": 0.05, "d": 0.04, "e": 0.03}, 8)
    assert sure_pair.tools == ["a", "b"]
    assert choose_tools({"a": 0.9, "b": 0.9, "c": 0.9}, 2).tools == [
        "a",
        "b",
    ]  # ties by name, within the slots
    assert choose_tools({}, 8).tools == []
    # A doubtful tool beside a sure one: more examples of the sure one keep the warm-up mostly right...
    mixed = {"a": 0.99, "b": 0.6, "c": 0.05}
    assert choose_tools(mixed, 8) == evidence.Choice(["a", "b"], 8)
    # ...but never more examples than the tools shown have; and a sure tool alone needs no repeats.
    assert choose_tools(mixed, 8, available={"a": 2, "b": 1, "c": 5}) == evidence.Choice(["a", "b"], 3)
    # When the surest tool's examples run out, further ones are the next surest's, while they raise
    # the expected score: a likely tool's do, a doubtful one's would dilute the warm-up.
    assert choose_tools(mixed, 8, available={"a": 1, "b": 6, "c": 5}) == evidence.Choice(["a", "b"], 2)
    likely = {"a": 0.99, "b": 0.95, "c": 0.6, "d": 0.05}
    assert choose_tools(likely, 8, available={"a": 1, "b": 6, "c": 1, "d": 3}) == evidence.Choice(
        ["a", "b", "c"], 8
    )
    assert choose_tools(likely, 8, available={"a": 1, "b": 1, "c": 6, "d": 3}) == evidence.Choice(
        ["a", "b", "c"], 3
    )
    assert choose_tools({"a": 0.99, "b": 0.05}, 8) == evidence.Choice(["a"], 1)


def _brute_force_expected_f(probabilities: dict[str, float], shown: list[str], slots: int) -> float:
    """Expected F-beta of ``shown`` over every set of needed tools, enumerated."""
    weight = evidence.RECALL_WEIGHT**2
    tools = sorted(probabilities)
    total = 0.0
    for needed in itertools.product((False, True), repeat=len(tools)):
        chance = 1.0
        for tool, is_needed in zip(tools, needed, strict=True):
            chance *= probabilities[tool] if is_needed else 1 - probabilities[tool]
        used = {t for t, n in zip(tools, needed, strict=True) if n}
        hits = len(set(shown) & used)
        if not hits:
            continue
        recall = hits / min(len(used), slots)
        precision = sum(t in used for t in shown) / len(shown)
        total += chance * (1 + weight) * precision * recall / (weight * precision + recall)
    return total


@settings(max_examples=40, deadline=None)
@example(probabilities={"a": 0.0004423, "b": 0.0004423}, slots=2)  # two unlikely tools: both still count
@given(
    probabilities=st.dictionaries(
        st.sampled_from("abcdef"), st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=6
    ),
    slots=st.integers(1, 5),
)
def test_choose_tools_takes_the_best_expected_score_of_its_candidates(
    probabilities: dict[str, float], slots: int
) -> None:
    """The choice scores at least as well, by exhaustive enumeration, as every candidate it considers:
    the k likeliest tools once each and the surest one repeated."""
    choice = choose_tools(probabilities, slots)
    ranked = [t for t, _ in sorted(probabilities.items(), key=lambda kv: (-kv[1], kv[0]))]
    assert choice.tools == ranked[: len(choice.tools)]
    assert len(choice.tools) <= choice.examples <= slots
    shown = choice.tools + [choice.tools[0]] * (choice.examples - len(choice.tools))
    chosen_score = _brute_force_expected_f(probabilities, shown, slots)
    for k in range(1, min(slots, len(ranked)) + 1):
        for n in range(k, slots + 1):
            other = ranked[:k] + [ranked[0]] * (n - k)
            assert chosen_score >= _brute_force_expected_f(probabilities, other, slots) - 1e-9


def test_a_placeholder_is_one_feature_naming_the_kind_of_detail() -> None:
    """ "Reservation <reservation_id_1>" says an id was given; the word "reservation" alone does not."""
    given_id = words("Please cancel reservation <reservation_id_1> for <name_1>.")
    assert "reservation_id:given" in given_id
    assert "name:given" in given_id
    assert "reservation_id:given" not in words("I lost my reservation number")
    assert words("a <b>tag</b> or 2 < 3 > 1") == ["tag"]  # markup and comparisons are not placeholders


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    allowed=st.sets(st.sampled_from(ALL_TOOLS)),
    task=st.sampled_from(["refund my kettle", "new address please", "silver lamps", "", "hello"]),
    slots=st.integers(1, 10),
    style=st.sampled_from(["triples", "closed"]),
)
def test_selection_never_shows_a_tool_outside_the_agents_tools(
    allowed: set[str], task: str, slots: int, style: str
) -> None:
    template = shop_template(repeat=1)
    result = warm_conversation(template, task, max_examples=slots, tools=allowed, style=style)
    shown = {c["function"]["name"] for m in result.messages for c in m.get("tool_calls") or ()}
    assert shown <= allowed
    assert set(result.tools) <= allowed
    assert set(result.evidence) <= allowed
    validate_conversation(result.messages, strict_ids=True)


def test_legacy_templates_without_episodes_also_respect_the_tools() -> None:
    template = shop_template().model_copy(update={"episodes": []})
    result = warm_conversation(template, "refund my kettle", tools={"escalate", "get_order"})
    assert set(result.tools) <= {"escalate", "get_order"}
    assert result.tools


@pytest.mark.parametrize("style", ["triples", "closed"])
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_warm_up_from_past_tasks_is_valid_in_every_style_and_format(style: str, fmt: str) -> None:
    template = shop_template()
    for task in ("refund my broken kettle", "which lamps do you sell", ""):
        result = warm_conversation(template, task, style=style, budget=900)
        validate_conversation(result.messages, strict_ids=True)
        assert result.estimated_tokens <= 900
        users = [m["content"] for m in result.messages if m["role"] == "user"]
        assert len(users) == len(set(users))  # no request repeats
        merged = inject(
            [{"role": "system", "content": "S"}, {"role": "user", "content": task or "hi"}], result.messages
        )
        validate_conversation(merged)
        if fmt == "anthropic":
            roles = [t["role"] for t in to_anthropic(merged)["messages"]]
            assert all(a != b for a, b in itertools.pairwise(roles))


def test_auto_chooses_by_fit_and_gives_the_same_template_for_the_same_task(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path)
    shop = shop_template(name="shop")
    other = Template(
        name="code",
        examples=[Example(tool_name="run_tests", result="12 passed", session_id="c", position=1)],
        episodes=[
            Episode(
                session_id="c",
                opening="run the unit tests of the parser",
                steps=[EpisodeStep(tool_name="run_tests", position=1)],
            )
        ],
    )
    store.save(shop)
    store.save(other)
    names = [warm(None, "please refund my broken kettle", store=store).template.name for _ in range(4)]
    assert names == ["shop"] * 4  # used more each time, still chosen: fit decides, not usage
    assert warm(None, "run the parser unit tests", store=store).template.name == "code"
    result = warm(None, "please refund my broken kettle", store=store)
    assert "fit" in result.as_dict()["why"]["template"]
    assert choose_template([shop, other], "refund my kettle") is shop


def test_cli_warm_tools_option_and_inject_reads_the_request_body_tools(tmp_path: Path) -> None:
    store = tmp_path / "templates"
    JsonDirStore(store).save(shop_template())
    runner = CliRunner()
    out = runner.invoke(
        app,
        [
            "warm",
            "shop",
            "--task",
            "refund my kettle",
            "--tools",
            "get_order,escalate",
            "--json",
            "--no-record",
            "--store",
            str(store),
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert set(data["tools"]) <= {"get_order", "escalate"} and data["tools"]
    assert data["why"]["template"] == "named by the caller"
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "refund my broken kettle"}],
        "tools": [{"type": "function", "function": {"name": "issue_refund", "parameters": {}}}],
    }
    out = runner.invoke(app, ["inject", "shop", "--no-record", "--store", str(store)], input=json.dumps(body))
    assert out.exit_code == 0, out.output
    merged = json.loads(out.output)
    names = {c["function"]["name"] for m in merged["messages"] for c in m.get("tool_calls") or ()}
    assert names == {"issue_refund"}
    assert merged["tools"] == body["tools"]
    text = runner.invoke(
        app, ["warm", "shop", "--task", "refund my kettle", "--no-record", "--store", str(store)]
    )
    assert "from past" in text.output and "Tools:" in text.output


def test_repeated_warm_ups_are_deterministic() -> None:
    template = shop_template()
    tasks = ["refund my kettle", "new delivery address", "lamps in silver", "anything else"]
    random.Random(3).shuffle(tasks)
    first = [warm_conversation(template, t).messages for t in tasks]
    again = [warm_conversation(template, t).messages for t in tasks]
    assert first == again


def test_the_agent_tool_takes_the_agents_tools_and_says_why() -> None:
    from kindling.integrations.warm_tool import warm_session
    from kindling.templates import open_store

    open_store().save(shop_template())
    loaded = json.loads(
        warm_session({"action": "load", "name": "shop", "task": "refund my kettle", "tools": ["get_order"]})
    )
    assert loaded["success"], loaded
    assert loaded["tools"] == ["get_order"]
    assert loaded["why"]["past_tasks"]
    conversation = [{"role": "user", "content": "refund my kettle"}]
    injected = json.loads(
        warm_session(
            {"action": "inject", "name": "shop", "messages": conversation, "tools": ["issue_refund"]}
        )
    )
    assert injected["success"], injected
    names = {c["function"]["name"] for m in injected["messages"] for c in m.get("tool_calls") or ()}
    assert names == {"issue_refund"}
    assert "why" in injected


def test_evidence_is_reused_for_the_same_episodes_and_rebuilt_when_they_change() -> None:
    from kindling.warmup.plan import evidence_for

    template = shop_template(repeat=1, name="cached")
    first = evidence_for(template)
    assert evidence_for(template) is first
    # A copy that shares the episodes (model_copy is shallow) reads the same past tasks.
    assert evidence_for(template.model_copy(update={"description": "x"})) is first
    # An episode added in place is seen: the cache must not serve the old models.
    template.episodes.append(
        Episode(
            session_id="new",
            opening="cancel my subscription",
            steps=[EpisodeStep(tool_name="escalate", position=2)],
        )
    )
    grown = evidence_for(template)
    assert grown is not first
    # Equal episodes in another object (a template read again from its store) reuse the models too.
    again = Template.model_validate(template.model_dump())
    assert evidence_for(again) is grown


def test_calls_made_side_by_side_each_show_their_own_tool() -> None:
    # A past task called two tools in one message: both steps sit at the same position, and each
    # must bring its own tool's example (not the first call of that message twice).
    examples = [
        Example(tool_name="get_order", arguments={"n": 1}, result="order", session_id="s", position=2),
        Example(tool_name="issue_refund", arguments={"n": 2}, result="refunded", session_id="s", position=2),
    ]
    steps = [
        EpisodeStep(tool_name="get_order", position=2),
        EpisodeStep(tool_name="issue_refund", position=2),
    ]
    episodes = [Episode(session_id="s", opening="refund my broken kettle", steps=steps)]
    template = Template(name="t", examples=examples, episodes=episodes)
    plan = plan_examples(template, "refund my broken kettle", max_examples=8)
    shown = [c.example.tool_name for c in plan.candidates]
    assert sorted(shown) == ["get_order", "issue_refund"]


def test_a_tools_example_comes_from_the_most_similar_past_task_that_kept_one() -> None:
    # A template keeps one example per distinct call, so the closest past tasks often used a tool
    # without holding its example. The example shown is then from the most similar past task that
    # does, even beyond the closest twenty, not simply the template's first one of the tool.
    steps = [EpisodeStep(tool_name="run_tests", position=2)]
    episodes = [
        Episode(session_id=f"near-{i}", opening="fix the failing parser tests", steps=steps)
        for i in range(24)
    ]
    episodes += [
        Episode(session_id=f"cake-{i}", opening=f"bake a chocolate cake {i}", steps=steps) for i in range(5)
    ]
    far = "the parser tests are failing"  # similar (no "fix"), but after the twenty-four closest
    episodes.append(Episode(session_id="far", opening=far, steps=steps))
    examples = [
        Example(
            tool_name="run_tests", arguments={"suite": suite}, result=result, session_id=session, position=2
        )
        for suite, result, session in (("oven", "baked", "cake-0"), ("parser", "3 passed", "far"))
    ]
    template = Template(name="t", examples=examples, episodes=episodes)
    plan = plan_examples(template, "fix the failing parser tests", max_examples=1)
    assert [c.example.arguments for c in plan.candidates] == [{"suite": "parser"}]
    assert [p["session_id"] for p in plan.past_tasks] == ["far"]


def test_a_task_learns_the_tools_most_of_its_runs_used_not_one_runs_detour() -> None:
    # Three runs of the same task (one task id): one took a detour through `check_stock`.
    # Runs of other kinds of task keep the model honest about base rates.
    examples: list[Example] = []
    episodes: list[Episode] = []
    runs = [
        ["get_order", "issue_refund"],
        ["get_order", "issue_refund"],
        ["get_order", "check_stock", "issue_refund"],
    ]
    for number, tools in enumerate(runs * 3):
        session = f"refund-{number}"
        steps = []
        for position, tool in enumerate(tools, start=1):
            examples.append(Example(tool_name=tool, result="ok", session_id=session, position=position))
            steps.append(EpisodeStep(tool_name=tool, position=position))
        episodes.append(
            Episode(
                session_id=session, opening="refund my broken kettle", task_id=str(number // 3), steps=steps
            )
        )
    template = Template(name="t", examples=examples, episodes=episodes)
    plan = plan_examples(template, "refund my broken kettle", max_examples=8)
    assert set(plan.tools) == {"get_order", "issue_refund"}
    assert plan.evidence["check_stock"] < 0.2 < 0.8 < plan.evidence["issue_refund"]
    # Without task ids every run is its own task, and a third of them needed check_stock.
    for episode in episodes:
        episode.task_id = None
    fresh = Template(name="t2", examples=examples, episodes=list(episodes))
    assert plan_examples(fresh, "refund my broken kettle", max_examples=8).evidence["check_stock"] > 0.2


def test_the_new_task_is_scrubbed_like_the_past_tasks_before_they_are_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kindling.warmup.plan import as_past_tasks_are_known

    monkeypatch.setenv("KINDLING_HOME", str(tmp_path))
    known = as_past_tasks_are_known("Hi, my email is mia.garcia@example.com and I want a refund")
    assert "mia.garcia@example.com" not in known and "<email_1>" in known and "refund" in known
    # Past tasks kept "<email_1>" where their user gave an e-mail: that is what the new one matches.
    by_email = ["lookup_by_email", "issue_refund"]
    by_name = ["lookup_by_name", "issue_refund"]
    examples: list[Example] = []
    episodes: list[Episode] = []
    for number in range(6):
        tools, opening = (
            (by_email, f"my email is <email_1> and I want a refund for order {number}")
            if number % 2
            else (by_name, f"I am <name_1> <name_2> and I want a refund for order {number}")
        )
        session = f"s{number}"
        steps = []
        for position, tool in enumerate(tools, start=1):
            examples.append(Example(tool_name=tool, result="ok", session_id=session, position=position))
            steps.append(EpisodeStep(tool_name=tool, position=position))
        episodes.append(Episode(session_id=session, opening=opening, steps=steps))
    template = Template(name="t", examples=examples, episodes=episodes)
    plan = plan_examples(template, "Hi, my address is jo.doe@example.org, I want a refund", max_examples=4)
    assert plan.evidence["lookup_by_name"] < 0.3 < 0.7 < plan.evidence["lookup_by_email"]
    assert plan.tools == ["issue_refund", "lookup_by_email"]
    # With scrubbing turned off in mining.json the task is compared as it is.
    (tmp_path / "mining.json").write_text(json.dumps({"scrub_personal_data": False}))
    assert (
        as_past_tasks_are_known("my email is mia.garcia@example.com") == "my email is mia.garcia@example.com"
    )


def test_further_examples_are_of_the_surest_tool_and_no_more_than_it_has() -> None:
    # Every past task looked the customer up; five in eight also refunded (twice each). Only two
    # lookups were kept as examples. After one example of each tool, further ones are of the surest
    # tool (the lookup): a refund (p ~ 0.6) would dilute them, so it is not repeated though slots
    # are free, and the lookup runs out after its two examples.
    examples: list[Example] = []
    episodes: list[Episode] = []
    for number in range(8):
        session = f"s{number}"
        steps = [EpisodeStep(tool_name="lookup_customer", position=1)]
        if number < 2:
            examples.append(
                Example(tool_name="lookup_customer", result="found", session_id=session, position=1)
            )
        if number % 8 < 5:
            for position in (2, 3):
                examples.append(
                    Example(tool_name="issue_refund", result="ok", session_id=session, position=position)
                )
                steps.append(EpisodeStep(tool_name="issue_refund", position=position))
        episodes.append(Episode(session_id=session, opening="refund my kettle", steps=steps))
    template = Template(name="t", examples=examples, episodes=episodes)
    plan = plan_examples(template, "refund my kettle", max_examples=8)
    assert set(plan.tools) == {"lookup_customer", "issue_refund"}
    shown = Counter(c.example.tool_name for c in plan.candidates)
    assert shown == Counter({"lookup_customer": 2, "issue_refund": 1})


def test_further_examples_spill_to_the_next_surest_tool_when_the_surest_has_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every past task looked the customer up (one example kept: the same call each time), seven in
    # eight refunded (four examples kept), a few also wrote a note. The lookup has no second example,
    # so the spare slots go to refunds, not to nothing. (Eight past tasks with one text say no more
    # than the general list does, so the word models' choice is trusted here to see how it is built.)
    monkeypatch.setattr(evidence.TaskEvidence, "trust", lambda self, slots, available: -math.inf)
    examples = [Example(tool_name="lookup_customer", result="found", session_id="s0", position=1)]
    episodes: list[Episode] = []
    for number in range(8):
        session = f"s{number}"
        steps = [EpisodeStep(tool_name="lookup_customer", position=1)]
        if number < 7:
            steps.append(EpisodeStep(tool_name="issue_refund", position=2))
        if number < 4:
            examples.append(Example(tool_name="issue_refund", result="ok", session_id=session, position=2))
        if number in (3, 6):
            steps.append(EpisodeStep(tool_name="write_note", position=3))
            examples.append(Example(tool_name="write_note", result="ok", session_id=session, position=3))
        episodes.append(Episode(session_id=session, opening="refund my kettle", steps=steps))
    template = Template(name="t", examples=examples, episodes=episodes)
    plan = plan_examples(template, "refund my kettle", max_examples=6)
    shown = Counter(c.example.tool_name for c in plan.candidates)
    assert (shown["lookup_customer"], shown["issue_refund"]) == (1, 4)


def test_a_warm_up_parses_its_task_once_however_many_templates_it_weighs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kindling.warmup import query as query_module
    from kindling.warmup.query import Query

    monkeypatch.setenv("KINDLING_HOME", str(tmp_path))
    store = JsonDirStore(tmp_path / "templates")
    for number in range(5):
        store.save(shop_template(repeat=1, name=f"shop{number}"))
    scrubbed: list[str] = []
    real = query_module.as_past_tasks_are_known

    def counting(task: str) -> str:
        scrubbed.append(task)
        return real(task)

    monkeypatch.setattr(query_module, "as_past_tasks_are_known", counting)
    task = "Hi, my email is mia.garcia@example.com and I want a refund for my kettle"
    result = warm(None, task, store=store, record_use=False)
    assert scrubbed == [task]  # not once per template, once more for the reason and once for the plan
    # The parts the warm-up reads: the scrubbed text, its words and features, the task type.
    query = Query.parse(task)
    assert "mia.garcia@example.com" not in query.scrubbed and "email:given" in query.features
    assert set(query.words) == query.features and "refund" in query.words
    # A parsed query gives what its text gives, at every step.
    template = store.get(result.template.name)
    assert warm_conversation(template, query).messages == warm_conversation(template, task).messages
    assert choose_template(store.list(), query) is not None
    assert choose_template(store.list(), query).name == choose_template(store.list(), task).name


def test_the_general_list_is_the_best_fixed_list_of_the_past_tasks() -> None:
    # Past tasks' tools: "a" nearly always, "b" half the time, "c" once. Every fixed list of at most
    # three examples is tried by brute force; the greedy general list scores as well as the best one
    # (by the F-score choose_tools weighs recall with).
    needs = [{"a"}, {"a", "b"}, {"a", "b"}, {"a"}, {"a", "b", "c"}, {"b"}]
    episodes = [
        Episode(
            session_id=f"s{i}",
            opening=f"task {i}",
            steps=[EpisodeStep(tool_name=t, position=p) for p, t in enumerate(sorted(need), start=1)],
        )
        for i, need in enumerate(needs)
    ]
    found = evidence.TaskEvidence(episodes)
    for slots in (1, 2, 3):
        general = found.general_list(slots)

        def mean_f1(shown: tuple[str, ...], slots: int = slots) -> float:
            lists = found.counts([list(shown)])
            return float(evidence.list_f1(lists, found.truth, slots, beta=evidence.RECALL_WEIGHT).mean())

        best = max(
            mean_f1(shown)
            for n in range(1, slots + 1)
            for shown in itertools.combinations_with_replacement(["a", "b", "c"], n)
        )
        assert mean_f1(tuple(general)) == pytest.approx(best)
    assert found.general_list(2) == ["a", "b"]
    # A tool's repeats are capped at the examples it has; a tool with none is never listed.
    capped = found.general_list(3, {"a": 1, "b": 0, "c": 1})
    assert "b" not in capped and capped.count("a") <= 1 and capped


def test_a_task_whose_words_never_told_the_tools_gets_the_general_list() -> None:
    # The past tasks' words say nothing about their tools (each text is random), so the word models'
    # record on held-out past tasks is no better than the general list's: it shows, and says so.
    rng = random.Random(5)
    vocabulary = [f"w{i}" for i in range(40)]
    examples: list[Example] = []
    episodes: list[Episode] = []
    for number in range(60):
        session = f"s{number}"
        tools = ["lookup"] + (["refund"] if rng.random() < 0.5 else ["change"])
        steps = []
        for position, tool in enumerate(tools, start=1):
            examples.append(Example(tool_name=tool, result="ok", session_id=session, position=position))
            steps.append(EpisodeStep(tool_name=tool, position=position))
        opening = " ".join(rng.sample(vocabulary, 6))
        episodes.append(Episode(session_id=session, opening=opening, steps=steps))
    template = Template(name="t", examples=examples, episodes=episodes)
    from kindling.warmup.plan import evidence_for

    general = evidence_for(template).general_list(3, {"lookup": 60, "refund": 60, "change": 60})
    for said in (vocabulary[:6], vocabulary[10:16], vocabulary[30:36]):
        plan = plan_examples(template, " ".join(said), max_examples=3)
        shown = Counter(c.example.tool_name for c in plan.candidates)
        assert shown == Counter(general), plan.reason
        assert plan.general == ("gains too little" in plan.reason)
    # With no task at all the general list shows too, and the result says it was chosen without one.
    result = warm_conversation(template, "", max_examples=3)
    assert result.general and "no task given" in result.reason
    assert result.as_dict()["why"]["general"] is True
    matched = warm_conversation(
        shop_template(), "I would like a refund for my broken toaster", max_examples=8
    )
    assert not matched.general and matched.as_dict()["why"]["general"] is False


def test_cli_warm_says_when_it_chooses_without_a_task_or_without_a_match(tmp_path: Path) -> None:
    store = tmp_path / "templates"
    JsonDirStore(store).save(shop_template())
    runner = CliRunner()
    out = runner.invoke(app, ["warm", "--auto", "--no-record", "--store", str(store)])
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert "no task given, so it is chosen without one" in flat
    assert "General examples, not matched to the task: no task given" in flat
    out = runner.invoke(
        app, ["warm", "--auto", "--task", "zzz qqq", "--json", "--no-record", "--store", str(store)]
    )
    data = json.loads(out.output)
    assert data["why"]["general"] is True and "no past task is similar enough" in data["why"]["tools"]
    assert data["tools"]  # general examples, not nothing
