"""Warm-up: selection, message building, injection, protocol validation, Anthropic conversion."""

from __future__ import annotations

import copy
import hashlib
import itertools
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kindling.errors import ConversationError, NotFoundError
from kindling.mining import classify_task_text
from kindling.mining.model import Example, OutcomeStatus
from kindling.templates import JsonDirStore, Template
from kindling.warmup import (
    build_conversation,
    choose_template,
    estimate_conversation_tokens,
    estimate_tokens,
    inject,
    inject_warm,
    rank_examples,
    select_examples,
    to_anthropic,
    tokens,
    validate_conversation,
    warm,
    warm_conversation,
)
from kindling.warmup.build import FRAME_END, FRAME_INTRO, READABLE_RESULT_TOKENS, truncate_to_tokens

ID_RE = re.compile(r"[A-Za-z0-9_-]{1,40}")


def ex(tool: str, context: str, result: str = "ok", **fields: Any) -> Example:
    return Example(tool_name=tool, context=context, result=result, **fields)


CODE_EXAMPLES = [
    ex("read_file", "Read src/parser.py to find the tokenizer bug", "def tokenize(): ..."),
    ex("read_file", "Open the parser module", "class Parser: ..."),
    ex("read_file", "Show me setup.cfg", "[metadata]"),
    ex("patch", "Fix the off-by-one in the tokenizer", "patched 1 hunk"),
    ex("terminal", "Run the unit tests for the parser", "12 passed"),
    ex("web_search", "Search the web for the weather in Paris", "sunny"),
    ex("browser_navigate", "Open the news site", "loaded"),
]


# ------------------------------------------------------------------------------------ tokens / truncation


def test_token_estimate_is_chars_over_four(monkeypatch: pytest.MonkeyPatch) -> None:
    # Forced, so a machine with tiktoken and a cached encoding runs this test too.
    monkeypatch.setenv("KINDLING_TOKENIZER", "chars")
    tokens._encoder.cache_clear()
    try:
        assert estimate_tokens("") == 0
        assert estimate_tokens("abcd") == 1
        assert estimate_tokens("abcde") == 2
        assert estimate_tokens("x" * 400) == 100
    finally:
        tokens._encoder.cache_clear()


FAKE_TIKTOKEN = """
import os

def get_encoding(name):
    with open(os.environ["FAKE_TIKTOKEN_LOG"], "a") as log:
        log.write(name + "\\n")

    class Encoding:
        def encode(self, text, disallowed_special=()):
            return text.split()

    return Encoding()
"""


def test_tiktoken_is_used_only_when_its_encoding_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tiktoken is an optional extra and not installed here; a stand-in package records whether
    # get_encoding (which downloads an uncached encoding, with no timeout) is ever called.
    package = tmp_path / "site" / "tiktoken"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_TIKTOKEN)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cache = tmp_path / "cache"
    cache.mkdir()
    log = tmp_path / "calls.log"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setenv("FAKE_TIKTOKEN_LOG", str(log))
    monkeypatch.delenv("KINDLING_TOKENIZER", raising=False)
    text = "one two three four five six seven eight"  # 39 characters, 8 words
    try:
        tokens._encoder.cache_clear()
        assert estimate_tokens(text) == 10  # not cached: characters / 4 ...
        assert not log.exists()  # ... and no download was attempted
        url = b"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
        (cache / hashlib.sha1(url).hexdigest()).write_text("cached encoding")
        tokens._encoder.cache_clear()
        assert estimate_tokens(text) == 8  # cached: tiktoken counts
        assert log.read_text() == "cl100k_base\n"
        monkeypatch.setenv("KINDLING_TOKENIZER", "chars")
        tokens._encoder.cache_clear()
        assert estimate_tokens(text) == 10
    finally:
        sys.modules.pop("tiktoken", None)
        tokens._encoder.cache_clear()


def test_truncation_keeps_a_marker_and_fits() -> None:
    text = "x" * 1000
    cut = truncate_to_tokens(text, 50)
    assert estimate_tokens(cut) <= 50
    assert "truncated" in cut
    assert cut.startswith("xxxx")
    assert truncate_to_tokens("short", 50) == "short"


# ------------------------------------------------------------------------------------ selection


def test_relevant_examples_come_first_and_tools_do_not_repeat_while_another_is_unused() -> None:
    order = rank_examples(CODE_EXAMPLES, "fix the tokenizer bug in the parser and run the tests")
    tools = [CODE_EXAMPLES[i].tool_name for i in order]
    # The three relevant tools come first, each once; then one example of each other tool (tasks
    # use tools their text does not name); only then does a relevant tool repeat.
    assert set(tools[:3]) == {"read_file", "patch", "terminal"}
    assert set(tools[3:5]) == {"web_search", "browser_navigate"}
    assert tools[5:] == ["read_file", "read_file"]
    # Among repeats, the more relevant example comes first.
    assert CODE_EXAMPLES[order[5]].context == "Open the parser module"


def test_selection_follows_the_task() -> None:
    order = rank_examples(CODE_EXAMPLES, "what is the weather in Paris? search the web")
    assert CODE_EXAMPLES[order[0]].tool_name == "web_search"


def test_failed_examples_are_not_selected() -> None:
    examples = [ex("terminal", "run the tests", outcome=OutcomeStatus.FAILED), ex("patch", "fix it")]
    assert [examples[i].tool_name for i in rank_examples(examples, "run the tests")] == ["patch"]


def test_selection_fills_but_never_exceeds_the_budget() -> None:
    examples = [ex(f"tool_{i}", f"task number {i}", "r" * 2000) for i in range(30)]
    shown = []
    for budget in (0, 10, 50, 200, 600, 2000, 10000):
        selection = select_examples(examples, "task", budget=budget)
        messages = build_conversation(selection.shown, budget=budget, example_tokens=selection.example_tokens)
        assert estimate_conversation_tokens(messages) <= budget
        # Whole examples: request, call, result each; the block ends with the note.
        assert len(messages) == (3 * len(selection.examples) + 1 if selection.examples else 0)
        shown.append(len(selection.examples))
    assert shown == sorted(shown)  # a bigger budget never shows fewer examples
    big = select_examples(examples, "task", budget=10000, max_examples=8)
    assert len(big.examples) == 8
    # Results far longer than a share of the budget are cut to fit it, with a marker.
    long = [ex(f"tool_{i}", f"task number {i}", "r" * 20000) for i in range(30)]
    selection = select_examples(long, "task", budget=10000, max_examples=8)
    assert len(selection.examples) == 8
    rendered = build_conversation(selection.shown, budget=10000, example_tokens=selection.example_tokens)
    results = [m["content"] for m in rendered if m["role"] == "tool"]
    assert len(results) == 8
    assert all("…[truncated" in r and estimate_tokens(r) < 10000 // 8 for r in results)
    assert estimate_conversation_tokens(rendered) <= 10000
    assert not select_examples(examples, "task", budget=10).examples


def test_a_small_budget_shows_fewer_whole_examples_never_stubs() -> None:
    examples = [ex(f"tool_{i}", f"task number {i}", "result line. " * 200) for i in range(12)]
    counts = []
    for budget in (200, 300, 500, 800, 1200, 2000):
        result = warm_conversation(Template(name="t", examples=examples), "task", budget=budget)
        assert result.estimated_tokens <= budget
        for message in result.messages:
            if message["role"] == "tool":
                # Never a ~10-character stub: at least the readable minimum of the real result.
                assert estimate_tokens(message["content"]) >= READABLE_RESULT_TOKENS - 8
                assert message["content"].startswith("result line.")
        counts.append(len(result.tools))
    assert counts == sorted(counts) and counts[0] < counts[-1]
    assert counts[0] >= 1


def test_no_request_repeats_within_a_warm_up() -> None:
    shared = "Please sort out my order and the refund"
    examples = [
        ex("lookup", shared, "found", session_id="s1"),
        ex("refund", shared, "refunded", session_id="s1"),
        ex("notify", shared, "sent", session_id="s2"),
        ex("lookup", "Another request", "found", session_id="s3", arguments={"id": 2}),
    ]
    for style in ("triples", "closed"):
        messages = build_conversation(examples, style=style)
        validate_conversation(messages, strict_ids=True)
        users = [m["content"] for m in messages if m["role"] == "user"]
        assert len(users) == 2
        assert sum(shared in u for u in users) == 1
        assert len([m for m in messages if m.get("tool_calls")]) == 4


def test_a_harness_note_in_an_examples_request_is_never_shown() -> None:
    # A later Claude Code turn: the harness's notes (another user's CLAUDE.md, open files) around
    # the user's words; and one cut short where mining truncated the request inside a note.
    note = "<system-reminder>\nCLAUDE.md of someone else: deploy key lives in ~/.ssh/prod\n</system-reminder>"
    examples = [
        ex("read_file", f"{note}\nNow open the parser module", session_id="s1", arguments={"path": "a.py"}),
        ex("terminal", "Run the parser tests <system-reminder>\nCLAUDE.md of someone", session_id="s2"),
        ex("grep", note, session_id="s3", arguments={"pattern": "x"}),
    ]
    for style in ("triples", "closed"):
        messages = build_conversation(examples, style=style)
        validate_conversation(messages, strict_ids=True)
        users = [m["content"] for m in messages if m["role"] == "user"]
        assert not any("system-reminder" in u or "CLAUDE.md" in u for u in users), users
        assert any("Now open the parser module" in u for u in users)
        assert any("Run the parser tests" in u for u in users)
        assert any("Use grep for this step." in u for u in users)  # nothing of the user's own


def test_index_cache_tells_same_named_templates_apart() -> None:
    first = Template(
        name="same", examples=[ex("read_file", "read the config"), ex("web_search", "search news")]
    )
    second = first.model_copy(
        update={"examples": [ex("patch", "search news"), ex("terminal", "read the config please")]}
    )
    assert warm_conversation(first, "read the config").tools[0] == "read_file"
    assert warm_conversation(second, "read the config").tools[0] == "terminal"


def test_index_cache_sees_outcomes_counts_and_arguments() -> None:
    worked = Template(name="same", examples=[ex("a", "x", count=1), ex("b", "x", count=9)])
    assert warm_conversation(worked, "").tools == ["b", "a"]
    # Same name, version, contexts and sessions; only what the index also reads differs.
    failed = worked.model_copy(
        update={"examples": [e.model_copy(update={"outcome": OutcomeStatus.FAILED}) for e in worked.examples]}
    )
    assert warm_conversation(failed, "").messages == []
    recounted = worked.model_copy(update={"examples": [ex("a", "x", count=9), ex("b", "x", count=1)]})
    assert warm_conversation(recounted, "").tools == ["a", "b"]
    argued = worked.model_copy(
        update={"examples": [ex("a", "x", arguments={"q": "parser"}), ex("b", "x", arguments={"q": "web"})]}
    )
    assert warm_conversation(argued, "parser").tools[0] == "a"


def test_empty_task_falls_back_to_most_frequent() -> None:
    examples = [ex("a", "x", count=1), ex("b", "y", count=9), ex("c", "z", count=3)]
    assert [examples[i].tool_name for i in rank_examples(examples, "")] == ["b", "c", "a"]


def test_choose_template_by_task_type_then_tags_then_least_used() -> None:
    task = "fix the bug in the parser function and refactor the code"
    # The ordering is ours; what type a text is belongs to mining's classifier.
    wanted = classify_task_text(task).value
    other = "research" if wanted != "research" else "terminal"
    same = Template(name="same", task_type=wanted, examples=CODE_EXAMPLES[:2], usage_count=5)
    same_tagged = Template(
        name="same-parser", task_type=wanted, tags=["parser"], examples=CODE_EXAMPLES[:2], usage_count=9
    )
    different = Template(name="different", task_type=other, tags=["parser"], examples=CODE_EXAMPLES[5:6])
    mixed = Template(name="mixed", task_type="mixed", examples=CODE_EXAMPLES[5:6], usage_count=100)
    empty = Template(name="empty", task_type=wanted)
    assert choose_template([different, same, same_tagged, empty], task) is same_tagged  # tags beat usage
    assert choose_template([different, same], task) is same  # type beats tags
    assert choose_template([different, mixed], task) is mixed  # untyped/mixed before another type
    same_less_used = same.model_copy(update={"name": "same-b", "usage_count": 1})
    assert choose_template([same, same_less_used], task) is same_less_used
    assert choose_template([empty], task) is None
    # Only failed examples (legacy files keep them): nothing to inject, so never chosen.
    all_failed = same_tagged.model_copy(
        update={
            "name": "all-failed",
            "usage_count": 0,
            "examples": [ex("patch", "fix the parser", outcome=OutcomeStatus.FAILED)],
        }
    )
    assert choose_template([all_failed, same], task) is same
    assert choose_template([all_failed], task) is None


# ------------------------------------------------------------------------------------ building


@pytest.mark.parametrize("style", ["triples", "closed"])
def test_built_conversation_is_valid_with_safe_unique_ids(style: str) -> None:
    messages = build_conversation(CODE_EXAMPLES, style=style, system_prompt="Be brief.")
    validate_conversation(messages, strict_ids=True)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    ids = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    assert len(ids) == len(set(ids)) == len(CODE_EXAMPLES)
    assert all(ID_RE.fullmatch(i) for i in ids)
    if style == "closed":
        # Each request closes with an assistant reply; the last one carries the end note.
        assert len(messages) == 1 + 4 * len(CODE_EXAMPLES)
        roles = [m["role"] for m in messages[1:]]
        assert roles[:4] == ["user", "assistant", "tool", "assistant"]
        assert "worked" in messages[4]["content"]
    else:
        assert len(messages) == 1 + 3 * len(CODE_EXAMPLES) + 1


@pytest.mark.parametrize("style", ["triples", "closed"])
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_the_block_is_framed_as_past_examples_in_every_style_and_format(style: str, fmt: str) -> None:
    template = Template(name="t", examples=CODE_EXAMPLES, system_prompt_addendum="Be brief.")
    result = warm_conversation(template, "fix the parser", style=style)
    validate_conversation(result.messages, strict_ids=True)
    conversation = [{"role": "system", "content": "S"}, {"role": "user", "content": "fix the parser"}]
    merged = inject(conversation, result.messages)
    validate_conversation(merged, strict_ids=True)
    data = result.as_dict(fmt)
    turns = data["messages"]

    def text(turn: dict[str, Any]) -> str:
        content = turn.get("content")
        if isinstance(content, list):
            return " ".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
        return str(content or "")

    users = [text(t) for t in turns if t["role"] == "user" and text(t)]
    assert users[0].startswith(FRAME_INTRO)
    assert all(u.split("\n\n")[-1].startswith("Past request") for u in users)
    assert turns[-1]["role"] == "assistant"
    assert text(turns[-1]).endswith(FRAME_END)
    if fmt == "anthropic":
        roles = [t["role"] for t in to_anthropic(merged)["messages"]]
        assert all(a != b for a, b in itertools.pairwise(roles))


def test_unknown_style_is_an_error() -> None:
    with pytest.raises(ConversationError, match="style"):
        build_conversation(CODE_EXAMPLES, style="pairs")


def test_raw_arguments_stay_parseable() -> None:
    messages = build_conversation([Example(tool_name="t", raw_arguments="not json")])
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"input":"not json"}'


# ------------------------------------------------------------------------------------ injection


def test_inject_after_leading_system_messages_without_mutating() -> None:
    conversation = [
        {"role": "system", "content": "You are helpful."},
        {"role": "system", "content": "Tools are available."},
        {"role": "user", "content": "Fix the parser"},
    ]
    before = copy.deepcopy(conversation)
    warm_messages = build_conversation(CODE_EXAMPLES[:2], system_prompt="Addendum")
    warm_before = copy.deepcopy(warm_messages)
    merged = inject(conversation, warm_messages)
    assert conversation == before
    assert warm_messages == warm_before
    assert merged[:2] == conversation[:2]
    assert merged[2] == {"role": "system", "content": "Addendum"}
    assert merged[-1] == conversation[-1]
    validate_conversation(merged)


def test_inject_renames_clashing_ids() -> None:
    warm_messages = build_conversation(CODE_EXAMPLES[:1])
    taken = warm_messages[1]["tool_calls"][0]["id"]
    conversation = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": taken, "function": {"name": "x"}}]},
        {"role": "tool", "tool_call_id": taken, "content": "y"},
    ]
    merged = inject(conversation, warm_messages)
    validate_conversation(merged, strict_ids=True)
    assert merged[-3:] == conversation


def test_renamed_ids_do_not_meet_other_warm_ids() -> None:
    def call(call_id: str) -> list[dict[str, Any]]:
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "function": {"name": "t"}}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "r"},
        ]

    warm_messages = [*call("a"), *call("a_1"), *call("x" * 40)]
    conversation = [{"role": "user", "content": "hi"}, *call("a"), *call("x" * 40)]
    merged = inject(conversation, warm_messages)
    validate_conversation(merged, strict_ids=True)
    ids = [c["id"] for m in merged for c in m.get("tool_calls") or ()]
    assert ids == ["a_2", "a_1", "x" * 38 + "_1", "a", "x" * 40]


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "wizard", "content": "x"}], "unknown role"),
        ([{"role": "tool", "tool_call_id": "a", "content": "x"}], "does not match"),
        (
            [
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "t"}}]},
                {"role": "user", "content": "next"},
            ],
            "not answered",
        ),
        ([{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "t"}}]}], "never answered"),
        (
            [
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "t"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "a", "content": "2"},
            ],
            "already answered",
        ),
        (
            [
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "t"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "t"}}]},
                {"role": "tool", "tool_call_id": "a", "content": "2"},
            ],
            "used twice",
        ),
        ([{"role": "user", "tool_calls": [{"id": "a", "function": {"name": "t"}}]}], "not an assistant"),
        ("not a list", "list of messages"),
        ([{"role": "tool", "tool_call_id": ["a"], "content": "x"}], "not a string"),
    ],
)
def test_validate_conversation_reports_protocol_breaks(messages: Any, problem: str) -> None:
    with pytest.raises(ConversationError, match=problem):
        validate_conversation(messages)


def test_strict_ids_reject_long_or_odd_ids() -> None:
    messages = [
        {"role": "assistant", "tool_calls": [{"id": "functions.x:0", "function": {"name": "t"}}]},
        {"role": "tool", "tool_call_id": "functions.x:0", "content": "1"},
    ]
    validate_conversation(messages)
    with pytest.raises(ConversationError, match="40 characters"):
        validate_conversation(messages, strict_ids=True)


# ------------------------------------------------------------------------------------ anthropic


def test_to_anthropic_splits_system_and_keeps_alternation() -> None:
    messages = build_conversation(CODE_EXAMPLES[:3], system_prompt="Sys")
    converted = to_anthropic([{"role": "system", "content": "Base"}, *messages])
    assert converted["system"] == "Base\n\nSys"
    turns = converted["messages"]
    roles = [t["role"] for t in turns]
    assert roles[0] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles))
    uses = [b for t in turns for b in t["content"] if b["type"] == "tool_use"]
    results = [b for t in turns for b in t["content"] if b["type"] == "tool_result"]
    assert [u["id"] for u in uses] == [r["tool_use_id"] for r in results]
    assert uses[0]["input"] == {}
    # A tool_result leads its user turn, as the API requires.
    for turn in turns:
        kinds = [b["type"] for b in turn["content"]]
        if "tool_result" in kinds:
            assert kinds[0] == "tool_result"


def test_to_anthropic_starts_with_user_and_rejects_unknown_roles() -> None:
    converted = to_anthropic([{"role": "assistant", "content": "hello"}])
    assert converted["messages"][0]["role"] == "user"
    with pytest.raises(ConversationError):
        to_anthropic([{"role": "robot", "content": "x"}])


# ------------------------------------------------------------------------------------ properties

names = st.sampled_from(["read_file", "patch", "terminal", "web_search", "write_file", "memory"])
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)
examples_strategy = st.lists(
    st.builds(
        Example,
        tool_name=names,
        context=texts,
        result=texts,
        arguments=st.dictionaries(
            st.sampled_from(["path", "q", "n"]), st.one_of(texts, st.integers()), max_size=3
        ),
        count=st.integers(1, 50),
        raw_arguments=st.none() | texts,
        outcome=st.sampled_from(list(OutcomeStatus)),
        session_id=st.sampled_from(["", "s1", "s2"]),
    ),
    max_size=25,
)
conversations = st.lists(
    st.one_of(
        st.builds(lambda t: {"role": "user", "content": t}, texts),
        st.builds(lambda t: {"role": "assistant", "content": t}, texts),
    ),
    max_size=6,
).map(lambda rest: [{"role": "system", "content": "sys"}, *rest])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    examples=examples_strategy,
    budget=st.integers(0, 4000),
    style=st.sampled_from(["triples", "closed"]),
    addendum=texts,
    task=texts,
    conversation=conversations,
)
def test_any_template_and_budget_gives_a_valid_conversation_within_budget(
    examples: list[Example],
    budget: int,
    style: str,
    addendum: str,
    task: str,
    conversation: list[dict[str, Any]],
) -> None:
    template = Template(name="prop", examples=examples, system_prompt_addendum=addendum)
    result = warm_conversation(template, task, budget=budget, style=style)
    validate_conversation(result.messages, strict_ids=True)
    assert result.estimated_tokens == estimate_conversation_tokens(result.messages) <= budget
    calls = [m for m in result.messages if m.get("tool_calls")]
    assert len(calls) <= sum(e.outcome is not OutcomeStatus.FAILED for e in examples)  # never failed ones
    converted = to_anthropic(result.messages)
    roles = [turn["role"] for turn in converted["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))
    blocks = [b for turn in converted["messages"] for b in turn["content"]]
    assert [b["id"] for b in blocks if b["type"] == "tool_use"] == [
        b["tool_use_id"] for b in blocks if b["type"] == "tool_result"
    ]
    before = copy.deepcopy(conversation)
    merged = inject(conversation, result.messages)
    validate_conversation(merged)
    assert conversation == before
    # The original messages keep their order, and leading system messages stay first.
    remaining = iter(merged)
    assert all(any(m == o for m in remaining) for o in conversation)
    assert merged[0] == conversation[0]


# ------------------------------------------------------------------------------------ store-backed


def test_warm_records_use_and_auto_chooses(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path)
    store.save(Template(name="code", task_type="code", examples=CODE_EXAMPLES[:5]))
    store.save(Template(name="web", task_type="research", examples=CODE_EXAMPLES[5:]))
    result = warm(None, "search the web for the latest research papers on BM25", store=store)
    assert result.template.name == "web"
    assert result.template.usage_count == 1
    assert store.get("web").usage_count == 1
    result = warm("code", "anything", store=store, record_use=False)
    assert store.get("code").usage_count == 0
    assert result.as_dict()["template"] == "code"
    anthropic = result.as_dict("anthropic")
    assert anthropic["messages"][0]["role"] == "user"
    with pytest.raises(NotFoundError):
        warm("missing", "x", store=store)
    with pytest.raises(NotFoundError):
        warm(None, "x", store=JsonDirStore(tmp_path / "empty"))


def test_inject_warm_uses_the_first_user_message_as_task(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path)
    store.save(Template(name="code", task_type="code", examples=CODE_EXAMPLES))
    conversation = [{"role": "system", "content": "S"}, {"role": "user", "content": "run the parser tests"}]
    merged, result = inject_warm(conversation, "code", store=store, budget=300)
    assert merged[0] == conversation[0]
    assert merged[-1] == conversation[-1]
    assert result.tools[0] == "terminal"
    with pytest.raises(ConversationError):
        inject_warm([{"role": "tool", "tool_call_id": "x", "content": ""}], "code", store=store)
