"""Choosing a template reads each template's summary and one index over them, not their tool models.

The summaries give exactly the similarities the tool models' index gives (so the choice is the one
it always was), they are made once per template version, a store re-reads only what changed, and a
rebuilt template is chosen by what it holds now.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kindling.mining.model import Example, OutcomeStatus
from kindling.templates import JsonDirStore, SqlStore, Template
from kindling.templates.index import choice_index, summary_of
from kindling.templates.model import Episode, EpisodeStep
from kindling.warmup import plan, warm
from kindling.warmup.evidence import TaskEvidence
from kindling.warmup.query import Query
from test_selection import KINDS, shop_template

WORDS = [
    "refund",
    "order",
    "address",
    "ship",
    "laptop",
    "lamp",
    "broken",
    "kettle",
    "cancel",
    "email",
    "track",
    "parcel",
    "colour",
    "chair",
]


def _template(name: str, seed: int, *, episodes: bool = True) -> Template:
    """A template of random past tasks over the shop's kinds (its tasks' words drawn with ``seed``)."""
    rng = random.Random(seed)
    examples: list[Example] = []
    past: list[Episode] = []
    for number in range(rng.randint(2, 12)):
        texts, tools = KINDS[rng.choice(sorted(KINDS))]
        opening = f"{rng.choice(texts)} {' '.join(rng.sample(WORDS, 3))} <email_{number % 2 + 1}>"
        session = f"{name}-{number}"
        steps = []
        for position, tool in enumerate(tools, start=1):
            failed = rng.random() < 0.1
            examples.append(
                Example(
                    tool_name=tool,
                    context=opening,
                    result="ok",
                    session_id=session,
                    position=position,
                    outcome=OutcomeStatus.FAILED if failed else OutcomeStatus.OK,
                )
            )
            steps.append(EpisodeStep(tool_name=tool, position=position))
        past.append(
            Episode(session_id=session, opening=opening, request=opening if number % 3 else "", steps=steps)
        )
    return Template(
        name=name, examples=examples, episodes=past if episodes else [], tags=rng.sample(WORDS, 2)
    )


def _kind_template(name: str, kind: str) -> Template:
    """A template whose past tasks are all of one kind of ``KINDS``."""
    texts, tools = KINDS[kind]
    examples = [
        Example(tool_name=tool, context=text, result="ok", session_id=f"{name}{n}", position=p)
        for n, text in enumerate(texts)
        for p, tool in enumerate(tools, start=1)
    ]
    episodes = [
        Episode(
            session_id=f"{name}{n}",
            opening=text,
            steps=[EpisodeStep(tool_name=tool, position=p) for p, tool in enumerate(tools, start=1)],
        )
        for n, text in enumerate(texts)
    ]
    return Template(name=name, examples=examples, episodes=episodes)


def _fit_by_the_models(template: Template, query: Query) -> float:
    """The fit as the tool models' similarity index gives it (what choosing read before summaries)."""
    if template.episodes:
        similar = TaskEvidence(template.episodes).similar(query.scrubbed, 3)
    else:
        contexts = sorted(
            {e.context for e in template.examples if e.context and e.outcome is not OutcomeStatus.FAILED}
        )
        pseudo = [Episode(session_id=str(i), opening=c) for i, c in enumerate(contexts)]
        similar = TaskEvidence(pseudo).similar(query.text, 3) if pseudo else []
    return sum(s.similarity for s in similar) / 3 if similar else 0.0


def test_the_index_gives_exactly_the_fits_the_models_give() -> None:
    templates = [_template(f"t{i}", i, episodes=i % 5 != 0) for i in range(30)]
    index = choice_index(templates)
    tasks = [
        "I want a refund for my broken kettle, my email is jo@example.org",
        "change the shipping address of my order",
        "which lamps do you sell",
        "refund refund refund",
        "nothing in common here",
        "",
    ]
    for task in tasks:
        query = Query.parse(task)
        fits = index.fits(query)
        for i, template in enumerate(templates):
            expected = _fit_by_the_models(template, query)
            assert fits[i] == expected, (task, template.name)
            assert plan.template_fit(template, query) == expected


def test_choosing_fits_no_tool_models_and_repeats_cost_no_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JsonDirStore(tmp_path)
    for i in range(24):
        store.save(_template(f"t{i:02d}", 100 + i))
    built: list[int] = []
    real = plan.TaskEvidence

    def counting(episodes: list[Episode]) -> TaskEvidence:
        built.append(len(episodes))
        return real(episodes)

    monkeypatch.setattr(plan, "TaskEvidence", counting)
    task = "please refund my broken kettle"
    first = warm(None, task, store=store, record_use=False)
    assert len(built) <= 1  # only the chosen template's models (none if another test fitted them)
    built.clear()
    again = warm(None, task, store=store, record_use=False)
    assert again.messages == first.messages and not built
    # The choice is the one the full comparison makes.
    templates = store.list()
    best = max(templates, key=lambda t: round(_fit_by_the_models(t, Query.parse(task)), 3))
    assert round(plan.template_fit(first.template, task), 3) == round(plan.template_fit(best, task), 3)


def test_a_store_reparses_only_what_changed_and_a_rebuild_is_chosen_by_what_it_holds_now(
    tmp_path: Path,
) -> None:
    store = JsonDirStore(tmp_path)
    store.save(shop_template(repeat=1, name="shop"))
    store.save(_kind_template("other", "refund"))
    listed = store.list()
    assert [t is u for t, u in zip(listed, JsonDirStore(tmp_path).list(), strict=True)] == [True, True]
    task = "change the shipping address of my order"
    assert warm(None, task, store=store, record_use=False).template.name == "shop"
    # Rebuilt with other past tasks, "shop" no longer fits an address change: the choice follows.
    store.save(_kind_template("shop", "catalog"))
    again = store.list()
    assert again[0] is listed[0] and again[1] is not listed[1] and again[1].version == 2
    assert plan.template_fit(again[1], task) == 0.0 < plan.template_fit(listed[1], task)
    assert warm(None, task, store=store, record_use=False).template.name == "other"
    # A use is counted in the file: the next read sees the count.
    store.record_use("other")
    assert {t.name: t.usage_count for t in store.list()}["other"] == 1


def test_a_sql_store_parses_only_new_versions_and_keeps_usage_counts_live(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "templates.db")
    try:
        store.save(shop_template(repeat=1, name="shop"))
        store.save(_template("other", 8))
        listed = store.list()
        again = SqlStore(tmp_path / "templates.db")
        try:
            assert [a is b for a, b in zip(listed, again.list(), strict=True)] == [True, True]
            again.record_use("shop")
        finally:
            again.close()
        counted = store.list()
        assert [t.name for t in counted] == ["other", "shop"]
        assert counted[0] is listed[0] and counted[1].usage_count == 1
        assert counted[1].episodes is listed[1].episodes  # the same parse, the live count
        store.save(_template("other", 9))
        rebuilt = {t.name: t for t in store.list()}
        assert rebuilt["other"].version == 2 and rebuilt["other"] is not listed[0]
        assert summary_of(rebuilt["other"]) is not summary_of(listed[0])
        assert rebuilt["other"].episodes == _template("other", 9).episodes
    finally:
        store.close()


def test_a_template_of_none_of_the_agents_tools_is_never_chosen_and_ties_keep_their_order() -> None:
    shop = shop_template(repeat=1, name="shop")
    twin = shop.model_copy(update={"name": "twin", "usage_count": 3})
    assert plan.choose_template([twin, shop], "refund my kettle") is shop  # a tie: less used first
    assert plan.choose_template([shop, twin], "refund my kettle", tools=["nothing_else"]) is None
    assert plan.choose_template([shop, twin], "refund my kettle", tools=["issue_refund"]) is shop


def test_a_store_keeps_each_templates_summary_and_older_or_edited_files_are_summarised_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orjson

    from kindling.templates import index
    from kindling.templates.store import SUMMARY_KEY

    store = JsonDirStore(tmp_path)
    template = _template("kept", 11)
    store.save(template)
    data = orjson.loads((tmp_path / "kept.json").read_bytes())
    assert isinstance(data[SUMMARY_KEY], str)  # compact text beside the template's fields
    computed = index._summarise(template)
    # Read in another state of the process (caches emptied): the kept summary is taken, not made.
    monkeypatch.setattr(index, "_SUMMARIES", type(index._SUMMARIES)())
    monkeypatch.setattr(index, "_BY_OBJECT", type(index._BY_OBJECT)())
    made: list[str] = []
    real = index._summarise

    def counting(t: Template) -> index.TaskSummary:
        made.append(t.name)
        return real(t)

    monkeypatch.setattr(index, "_summarise", counting)
    (tmp_path / "kept.json").write_bytes(orjson.dumps(data))  # a new file: read again
    adopted = summary_of(JsonDirStore(tmp_path).get("kept"))
    assert made == [] and (adopted.idf, adopted.postings, adopted.size) == (
        computed.idf,
        computed.postings,
        computed.size,
    )
    # A file written before summaries were kept, and one whose past tasks were edited by hand.
    older = {k: v for k, v in data.items() if k != SUMMARY_KEY}
    (tmp_path / "older.json").write_bytes(orjson.dumps({**older, "name": "older"}))
    edited = {**data, "name": "edited"}
    edited["episodes"] = [{**e, "opening": "cancel my subscription now"} for e in data["episodes"]]
    (tmp_path / "edited.json").write_bytes(orjson.dumps(edited))
    (tmp_path / "broken.json").write_bytes(orjson.dumps({**data, "name": "broken", SUMMARY_KEY: "{nope"}))
    listed = {t.name: t for t in JsonDirStore(tmp_path).list()}
    for name in ("older", "edited", "broken"):
        summary_of(listed[name])
    assert sorted(made) == ["broken", "edited", "older"]
    task = Query.parse("cancel my subscription")
    assert plan.template_fit(listed["edited"], task) == _fit_by_the_models(listed["edited"], task) > 0
    assert plan.template_fit(listed["older"], task) == _fit_by_the_models(listed["older"], task)


def test_a_use_is_counted_in_the_files_bytes_and_other_files_are_rewritten_whole(tmp_path: Path) -> None:
    import orjson

    store = JsonDirStore(tmp_path)
    store.save(_template("kept", 3))
    before = orjson.loads((tmp_path / "kept.json").read_bytes())
    held = store.get("kept")
    assert [store.record_use("kept") for _ in range(2)] == [1, 2]
    # Only the count changed, and this process's parse is reused with the new count.
    assert orjson.loads((tmp_path / "kept.json").read_bytes()) == {**before, "usage_count": 2}
    again = store.get("kept")
    assert again.usage_count == 2 and again.episodes is held.episodes
    assert JsonDirStore(tmp_path).get("kept").model_dump() == {**held.model_dump(), "usage_count": 2}
    # A file laid out otherwise (written by hand, compact) is parsed and written whole.
    (tmp_path / "compact.json").write_bytes(orjson.dumps({**before, "name": "compact", "usage_count": 5}))
    assert store.record_use("compact") == 6
    assert orjson.loads((tmp_path / "compact.json").read_bytes())["usage_count"] == 6
