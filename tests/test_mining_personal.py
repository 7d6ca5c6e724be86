"""Personal data in kept examples becomes typed placeholders, consistently within each example."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kindling.errors import ConfigError
from kindling.mining import mine, mining_config_path
from kindling.mining.config import MiningConfig, load_mining_config
from kindling.mining.model import Example
from kindling.mining.personal import PersonalDataScrubber
from kindling.sessions.model import Message, Session, ToolCall

SCRUBBER = PersonalDataScrubber.from_config(MiningConfig())
PLACEHOLDER = re.compile(r"<([a-z_]+)_([0-9]+)>")


def _example(arguments: dict[str, Any], result: str, context: str = "", tool: str = "t") -> Example:
    return Example(tool_name=tool, arguments=arguments, result=result, context=context, session_id="s1")


def _session(sid: str, calls: list[tuple[str, dict[str, Any], str]], request: str) -> Session:
    messages = [Message(role="user", content=request)]
    for i, (name, args, result) in enumerate(calls):
        messages.append(
            Message(role="assistant", tool_calls=(ToolCall(id=f"c{i}", name=name, arguments=args),))
        )
        messages.append(Message(role="tool", content=result, tool_call_id=f"c{i}"))
    messages += [Message(role="assistant", content="...")] * 20
    return Session(id=sid, source="cli", started_at=1.0, messages=tuple(messages))


USER_DETAILS = json.dumps(
    {
        "user_id": "sophia_martin_4574",
        "name": {"first_name": "Sophia", "last_name": "Martin"},
        "address": {
            "address1": "760 Elm Avenue",
            "address2": "Suite 564",
            "city": "Houston",
            "country": "USA",
            "state": "TX",
            "zip": "77034",
        },
        "email": "sophia.martin4832@example.com",
        "payment_methods": {
            "credit_card_1402145": {"source": "credit_card", "id": "credit_card_1402145", "last_four": "7890"}
        },
        "orders": ["#W1092119", "#W4327533"],
    }
)


def test_tau_user_details_become_placeholders_that_match_the_call() -> None:
    example = _example(
        {"user_id": "sophia_martin_4574"},
        USER_DETAILS,
        context="Sure, my ID is sophia_martin_4574. I'm Sophia Martin and I live at 760 Elm Avenue.",
        tool="get_user_details",
    )
    clean = SCRUBBER.scrub(example)
    assert clean.arguments == {"user_id": "<user_id_1>"}
    result = json.loads(clean.result)
    assert result["user_id"] == "<user_id_1>"
    assert clean.context == "Sure, my ID is <user_id_1>. I'm <name_1> <name_2> and I live at <address_1>."
    assert result["name"] == {"first_name": "<name_1>", "last_name": "<name_2>"}
    assert result["address"]["address1"] == "<address_1>"
    assert result["address"]["address2"] == "<address_2>"
    assert result["address"]["zip"] == "<zip_1>"
    assert result["address"]["city"] == "Houston"  # a city alone identifies no one
    assert result["email"] == "<email_1>"
    assert list(result["payment_methods"]) == ["<payment_id_1>"]
    assert result["payment_methods"]["<payment_id_1>"]["id"] == "<payment_id_1>"
    assert result["payment_methods"]["<payment_id_1>"]["last_four"] == "<card_number_1>"
    assert result["orders"] == ["<order_id_1>", "<order_id_2>"]
    # The structure is left alone.
    assert clean.tool_name == "get_user_details" and clean.session_id == "s1"
    for value in ("sophia", "Sophia", "Martin", "4574", "77034", "1402145", "W1092119", "Elm"):
        assert value not in clean.model_dump_json()


def test_find_user_id_by_name_zip() -> None:
    example = _example(
        {"first_name": "Yara", "last_name": "Silva", "zip": "77159"},
        "yara_silva_7567",
        context="Hi, I'm Yara Silva, my zip code is 77159.",
        tool="find_user_id_by_name_zip",
    )
    clean = SCRUBBER.scrub(example)
    assert clean.arguments == {"first_name": "<name_1>", "last_name": "<name_2>", "zip": "<zip_1>"}
    assert clean.result == "<user_id_1>"
    assert clean.context == "Hi, I'm <name_1> <name_2>, my zip code is <zip_1>."


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Write to ann.lee+work@mail.example.org please", "email"),
        ("Call me on (415) 555-0132 tomorrow", "phone"),
        ("Call me on +44 20 7946 0958", "phone"),
        ("my card is 4111 1111 1111 1111", "card_number"),
        ("card 5555555555554444 expires soon", "card_number"),
        ("Ship it to 221 Baker Street, please", "address"),
        ("the box goes to Apt 4B", "address"),
        ("Seattle, WA 98101 is the place", "zip"),
        ("I was born on 1990-04-12.", "date_of_birth"),
        ("Date of birth: March 3, 1985", "date_of_birth"),
        ("Sure, my ID is sophia_martin_4574.", "user_id"),
        ("user id: ab12cd", "user_id"),
        ("The order is #W1234567.", "order_id"),
        ("order number 88231-A please", "order_id"),
        ("pay with credit_card_1234567", "payment_id"),
        ("or gift_card_7252880 then", "payment_id"),
        ("my reservation code is ZFA04Y", "reservation_id"),
        ("My name is Ada Lovelace", "name"),
        ("Customer Isabella Johansson needs to return a hose", "name"),
        ("- First name: Chen\n- Last name: Smith", "name"),
        ("authenticated via name+zip: Chen Smith, ZIP 32255", "name"),
        ("look me up by my full name, Lei Wilson, and my zip code, 32255", "zip"),
        ("the ZIP should be 90210.", "zip"),
        ("you can look me up by my full name, Lei Wilson, and", "name"),
        ("(Visa, last four 9488)", "card_number"),
        ("You're Chen Smith, living in Jacksonville 32278.", "name"),
        ("You're Chen Smith, living in Jacksonville 32278.", "zip"),
        ("You are daiki_johnson_9523 living in Denver, USA, 80273.", "zip"),
    ],
)
def test_each_category_is_caught_in_free_text(text: str, kind: str) -> None:
    clean = SCRUBBER.scrub(_example({}, "", context=text))
    kinds = {m.group(1) for m in PLACEHOLDER.finditer(clean.context)}
    assert kind in kinds, clean.context


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        ("customer_id", "C-99", "customer_id"),
        ("accountId", "ACC-77810", "account_id"),
        ("reservation_id", "ZFA04Y", "reservation_id"),
        ("payment_method_id", "pm_abc", "payment_id"),
        ("phone_number", "4155550132", "phone"),
        ("dob", "1990-04-12", "date_of_birth"),
        ("card_number", "4111111111111111", "card_number"),
        ("contact_email", "x@y.io", "email"),
        ("full_name", "Ada", "name"),
        ("order_id", 12345, "order_id"),
    ],
)
def test_identifier_like_keys_are_replaced_whatever_their_value(key: str, value: Any, kind: str) -> None:
    clean = SCRUBBER.scrub(_example({key: value, "limit": 5}, f"ok {value}"))
    assert clean.arguments == {key: f"<{kind}_1>", "limit": 5}


@pytest.mark.parametrize(
    "text",
    [
        "/home/alice/projects/my_file_2024.py",
        "cat ~/data/user_report_2023.csv | wc -l",
        "def find_user(user_id: str) -> User:\n    return db.get(user_id=user_id)",
        "git clone git@github.com:org/repo.git && cd repo && make test_case_1234",
        "pip install requests==2.31.0 && python -m pytest tests/test_api_1234.py -q",
        "SELECT * FROM orders WHERE created_at > '2024-01-01' LIMIT 100;",
        "ts=1700000000000 version 1.2.3 port 8080 pid 12345",
        "The Customer class has a name field.",
        "for a, b in zip(range(10000), items):\n    total += a",
        "name: Build Docs\non: push\njobs:\n  build:\n    runs-on: ubuntu-22.04",
        "---\nname: Deploy Site\ndescription: Ship the static site.\n---",
    ],
)
def test_paths_commands_and_code_are_left_alone(text: str) -> None:
    clean = SCRUBBER.scrub(_example({"command": text, "path": text}, text, context=text))
    assert clean.context == text
    assert clean.result == text
    assert clean.arguments == {"command": text, "path": text}


def test_a_value_cut_short_by_truncation_is_still_replaced() -> None:
    from kindling.mining.passes import truncate

    result = truncate('{"note": "x", "user_id": "sophia_martin_4574", "more": "y"}', 37)
    assert result.startswith('{"note": "x", "user_id": "sophia_mart\n…[truncated')
    clean = SCRUBBER.scrub(_example({"user_id": "sophia_martin_4574"}, result))
    assert clean.result.startswith('{"note": "x", "user_id": "<user_id_1>\n…[truncated')
    assert "sophia" not in clean.result
    # Keyed values in JSON that no longer parses (cut, or inside a log line) are still found.
    cut = truncate(USER_DETAILS, 300)
    clean = SCRUBBER.scrub(_example({}, "log: " + cut))
    for value in ("Sophia", "Martin", "760 Elm Avenue", "77034", "sophia.martin4832@example.com"):
        assert value not in clean.result, (value, clean.result)
    assert '"first_name": "<name_1>"' in clean.result


def test_short_keyed_values_are_replaced_at_their_key_but_not_in_free_text() -> None:
    clean = SCRUBBER.scrub(_example({"user_id": "7", "page": 7}, '{"user_id": "7", "items": 7}'))
    assert clean.arguments == {"user_id": "<user_id_1>", "page": 7}
    assert json.loads(clean.result) == {"user_id": "7", "items": 7}


def test_an_order_id_given_without_its_prefix_gets_the_same_placeholder() -> None:
    clean = SCRUBBER.scrub(_example({"order_id": "#W9502127"}, "ok", context="provide 9502127 or W9502127"))
    assert clean.context == "provide <order_id_1> or <order_id_1>"


def test_distinct_values_get_distinct_placeholders_and_scrubbing_is_idempotent() -> None:
    clean = SCRUBBER.scrub(
        _example({"order_ids": ["#W1111111", "#W2222222", "#W1111111"]}, "#W2222222 then #W1111111")
    )
    assert clean.arguments == {"order_ids": ["<order_id_1>", "<order_id_2>", "<order_id_1>"]}
    assert clean.result == "<order_id_2> then <order_id_1>"
    assert SCRUBBER.scrub(clean) == clean


def test_an_episode_is_scrubbed_whole_with_one_numbering() -> None:
    episode = {
        "request": "Hi, I'm Yara Silva. Cancel order #W3730488.",
        "calls": [
            {
                "tool_name": "find_user_id_by_name_zip",
                "arguments": {"first_name": "Yara", "last_name": "Silva", "zip": "77159"},
                "result": "yara_silva_7567",
            },
            {
                "tool_name": "cancel_pending_order",
                "arguments": {"order_id": "#W3730488", "user": "yara_silva_7567"},
                "result": '{"order_id": "#W3730488", "user_id": "yara_silva_7567", "status": "cancelled"}',
            },
        ],
        "session_id": "yara_silva_7567",  # structure, not content: left as it is
    }
    clean = SCRUBBER.scrub(episode)
    assert clean["request"] == "Hi, I'm <name_1> <name_2>. Cancel order <order_id_1>."
    assert clean["calls"][0]["result"] == "<user_id_1>"
    assert clean["calls"][1]["arguments"] == {"order_id": "<order_id_1>", "user": "<user_id_1>"}
    assert json.loads(clean["calls"][1]["result"])["user_id"] == "<user_id_1>"
    assert clean["calls"][1]["tool_name"] == "cancel_pending_order"
    assert clean["session_id"] == "yara_silva_7567"
    assert episode["calls"][0]["result"] == "yara_silva_7567"  # pure: the input is unchanged
    # Only the texts, with values from the calls by field name (what episodes store).
    request, opening = SCRUBBER.scrub_texts(
        ["You are Yara Silva; cancel #W3730488 for user yara_silva_7567.", "Hi, it's about zip 77159"],
        context=episode["calls"],
    )
    assert request == "You are <name_1> <name_2>; cancel <order_id_1> for user <user_id_1>."
    assert opening == "Hi, it's about zip <zip_1>"


# A personal value of each shape, under a key that says what it is.
_VALUES = st.one_of(
    st.tuples(st.just("user_id"), st.from_regex(r"[a-z]{3,8}_[a-z]{3,8}_[0-9]{4}", fullmatch=True)),
    st.tuples(st.just("order_id"), st.from_regex(r"#W[0-9]{7}", fullmatch=True)),
    st.tuples(
        st.just("payment_method_id"),
        st.from_regex(r"(credit_card|gift_card|paypal)_[0-9]{7}", fullmatch=True),
    ),
    st.tuples(
        st.just("email"), st.from_regex(r"[a-z]{2,8}\.[a-z]{2,8}[0-9]{0,4}@example\.com", fullmatch=True)
    ),
    st.tuples(st.just("customer_id"), st.from_regex(r"[A-Z]{2}[0-9]{5,8}", fullmatch=True)),
    st.tuples(st.just("last_name"), st.from_regex(r"[A-Z][a-z]{2,9}", fullmatch=True)),
    st.tuples(st.just("reservation_id"), st.from_regex(r"[A-Z0-9]{6}", fullmatch=True)),
    st.tuples(st.just("zip"), st.from_regex(r"[0-9]{5}", fullmatch=True)),
)
_FILLER = st.sampled_from(["status", "pending", "the order", "ok", "items:", "and", "{", "}", ",", "note"])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_VALUES, min_size=1, max_size=6, unique_by=(lambda kv: kv[0], lambda kv: kv[1])),
    st.lists(st.tuples(st.integers(0, 5), _FILLER), min_size=1, max_size=8),
    st.booleans(),
)
def test_a_placeholder_in_the_arguments_appears_in_the_result_wherever_the_original_did(
    pairs: list[tuple[str, str]], layout: list[tuple[int, str]], as_json: bool
) -> None:
    values = [value for _key, value in pairs]
    assume(not any(a != b and a in b for a in values for b in values))  # no value inside another
    arguments = dict(pairs)
    parts = [f"{pairs[i % len(pairs)][1]} {word}" for i, word in layout]
    result = json.dumps({"log": parts}) if as_json else " ".join(parts)
    clean = SCRUBBER.scrub(_example(arguments, result))
    placeholders = dict(zip(arguments.values(), clean.arguments.values(), strict=True))
    for value, placeholder in placeholders.items():
        assert PLACEHOLDER.fullmatch(placeholder), (value, placeholder)
        assert value not in clean.result
        assert (placeholder in clean.result) == (value in result)
    assert len(set(placeholders.values())) == len(placeholders)  # distinct values, distinct placeholders
    # Replacing each original value by its placeholder gives exactly the scrubbed result.
    expected = result
    for value in sorted(placeholders, key=len, reverse=True):
        expected = expected.replace(value, placeholders[value])
    assert clean.result == expected


def test_mine_scrubs_kept_examples_by_default_and_keeps_them_when_asked() -> None:
    session = _session(
        "a",
        [("get_user_details", {"user_id": "sophia_martin_4574"}, USER_DETAILS)],
        "Sure, my ID is sophia_martin_4574.",
    )
    scrubbed = mine([session]).examples[0]
    assert scrubbed.arguments == {"user_id": "<user_id_1>"}
    assert "sophia" not in scrubbed.model_dump_json()
    kept = mine([session], keep_personal_data=True).examples[0]
    assert kept.arguments == {"user_id": "sophia_martin_4574"}
    assert kept.context == "Sure, my ID is sophia_martin_4574."


def test_credentials_are_still_redacted_beside_personal_data() -> None:
    session = _session(
        "a",
        [
            (
                "terminal",
                {"command": "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwx' x"},
                "for ann@corp.io",
            )
        ],
        "run it",
    )
    example = mine([session]).examples[0]
    assert "abcdefghijklmnopqrstuvwx" not in example.arguments["command"]
    assert "[REDACTED]" in example.arguments["command"]
    assert example.result == "for <email_1>"


def test_mining_json_extends_the_tables_and_can_turn_scrubbing_off(tmp_path: Path) -> None:
    path = mining_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "personal_keys": {"patient": "patient_id", "*_badge": "badge"},
                "personal_patterns": {"patient_id": [r"\bPT-\d{6}\b"]},
            }
        )
    )
    scrubber = PersonalDataScrubber.from_config(load_mining_config())
    clean = scrubber.scrub(
        _example({"patient": "Q1", "door_badge": "B-7781"}, "PT-123456 and B-7781", context="see PT-654321")
    )
    assert clean.arguments == {"patient": "<patient_id_1>", "door_badge": "<badge_1>"}
    assert clean.result == "<patient_id_2> and <badge_1>"
    assert clean.context == "see <patient_id_3>"
    # The defaults still apply beside the additions.
    assert scrubber.scrub(_example({"user_id": "abc_def_1234"}, "")).arguments == {"user_id": "<user_id_1>"}

    path.write_text(json.dumps({"scrub_personal_data": False}))
    session = _session("a", [("t", {"user_id": "abc_def_1234"}, "ok")], "hello")
    assert mine([session]).examples[0].arguments == {"user_id": "abc_def_1234"}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"personal_patterns": {"x": ["("]}}, "personal_patterns"),
        ({"personal_patterns": {"Bad Type": ["x"]}}, "personal_patterns"),
        ({"personal_keys": {"patient": "Not-A-Type"}}, "personal_keys"),
        ({"scrub_personal_data": "maybe"}, "scrub_personal_data"),
    ],
)
def test_bad_tables_are_one_clear_config_error(data: dict[str, Any], field: str) -> None:
    path = mining_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=field):
        load_mining_config()


DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
# Argument names whose values identify a customer (the check's own list, independent of the scrubber's).
_IDENTIFYING = (
    "user_id",
    "order_id",
    "payment_method_id",
    "email",
    "first_name",
    "last_name",
    "zip",
    "address1",
)


def _identifiers(session: Session) -> set[str]:
    found: set[str] = set()
    for message in session.messages:
        for call in message.tool_calls:
            for key in _IDENTIFYING:
                value = call.arguments.get(key) if isinstance(call.arguments, dict) else None
                if isinstance(value, str) and len(value) >= 3:
                    found.add(value)
    return found


@pytest.mark.skipif(not DATA.is_dir(), reason=f"development data not found at {DATA}")
def test_no_kept_example_from_the_development_data_carries_a_customer_identifier() -> None:
    from kindling.sessions import iter_sessions

    # Every folder that holds result files (the codesque16 runs are one folder deeper).
    folders = sorted({path.parent for path in DATA.rglob("*.json")})
    sessions = [s for folder in folders for s in iter_sessions(folder)]
    assert len(sessions) >= 500, "the development data holds 556 runs"
    owners: dict[str, set[str]] = {}
    for session in sessions:
        for value in _identifiers(session):
            owners.setdefault(value, set()).add(session.id)
    assert len(owners) > 300
    examples = mine(sessions, min_messages=0, max_examples=100_000, skip_zero_reward=False).examples
    assert len(examples) > 500
    token = re.compile(r"[\w#.@'-]+")
    leaks = []
    for example in examples:
        text = " ".join(
            [example.context, json.dumps(example.arguments), example.result, example.raw_arguments or ""]
        )
        words = set(token.findall(text)) | {w.strip(".'") for w in token.findall(text)}
        # Multi-word values (street addresses) are searched as text.
        hits = {v for v in owners if (v in words if " " not in v else v in text)}
        leaks += [
            (example.session_id, example.tool_name, v) for v in hits if owners[v] - {example.session_id}
        ]
    # Episodes (a past task's instruction or opening request) carry none either.
    from kindling.templates.episodes import EpisodeCollector

    collector = EpisodeCollector(min_messages=0)
    for session in sessions:
        collector(session)
    assert len(collector.episodes) > 300
    for episode in collector.episodes:
        text = f"{episode.request} {episode.opening}"
        words = set(token.findall(text)) | {w.strip(".'") for w in token.findall(text)}
        hits = {v for v in owners if (v in words if " " not in v else v in text)}
        leaks += [(episode.session_id, "episode", v) for v in hits if owners[v] - {episode.session_id}]
    assert not leaks, f"{len(leaks)} identifiers of another session kept, e.g. {leaks[:5]}"
    # Unscrubbed, the same check finds them: the test can fail.
    raw = mine(
        sessions, min_messages=0, max_examples=200, skip_zero_reward=False, keep_personal_data=True
    ).examples
    assert any(v in json.dumps(e.arguments) for e in raw for v in owners)


def _openai_file(path: Path) -> Path:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_user_details", "arguments": json.dumps({"user_id": "sophia_martin_4574"})},
    }
    messages = [
        {"role": "user", "content": "Sure, my ID is sophia_martin_4574."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": USER_DETAILS},
        {"role": "assistant", "content": "Done."},
    ]
    path.write_text(json.dumps({"id": "s1", "messages": messages}) + "\n")
    return path


def test_build_scrubs_by_default_and_keep_personal_data_keeps_it(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kindling.cli.main import app
    from kindling.templates import build_template, open_store

    source = _openai_file(tmp_path / "runs.jsonl")
    runner = CliRunner()
    result = runner.invoke(app, ["build", "clean", str(source), "--min-messages", "0", "--json"])
    assert result.exit_code == 0, result.output
    example = open_store().get("clean").examples[0]
    assert example.arguments == {"user_id": "<user_id_1>"}
    assert example.context == "Sure, my ID is <user_id_1>."
    assert '"user_id": "<user_id_1>"' in example.result and "sophia" not in example.result

    result = runner.invoke(app, ["build", "raw", str(source), "--min-messages", "0", "--keep-personal-data"])
    assert result.exit_code == 0, result.output
    assert open_store().get("raw").examples[0].arguments == {"user_id": "sophia_martin_4574"}
    # The Python API takes the same switch.
    kept = build_template("api", [source], min_messages=0, keep_personal_data=True)
    assert kept.examples[0].context == "Sure, my ID is sophia_martin_4574."
    assert "--keep-personal-data" in runner.invoke(app, ["build", "--help"]).output


def test_coding_sessions_full_of_paths_commands_and_code_come_out_unchanged(tmp_path: Path) -> None:
    from kindling.mining import mine_source
    from kindling.sessions import generate_sample_db

    db = generate_sample_db(tmp_path / "state.db", sessions=150, seed=11)
    kept = mine_source(db, workers=1, keep_personal_data=True).examples
    scrubbed = mine_source(db, workers=1).examples
    assert len(kept) == len(scrubbed) > 50
    assert any("/" in e.result for e in kept)  # the examples do carry paths and commands
    assert scrubbed == kept
