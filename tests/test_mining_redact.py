"""Credentials in mined examples are hidden; everything else, and the counting, is left alone."""

from __future__ import annotations

import json

import pytest

from kindling.errors import ConfigError
from kindling.mining import mine, mining_config_path
from kindling.mining.config import DEFAULT_SECRET_PATTERNS, MiningConfig
from kindling.mining.redact import REDACTED, SecretRedactor
from kindling.sessions.model import Message, Session, ToolCall

OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
GITHUB_TOKEN = "ghp_" + "a" * 36


def _session(sid: str, args: dict[str, object], result: str, request: str = "deploy it") -> Session:
    messages = [
        Message(role="user", content=request),
        Message(role="assistant", tool_calls=(ToolCall(id="c", name="terminal", arguments=args),)),
        Message(role="tool", content=result, tool_call_id="c"),
    ]
    messages += [Message(role="assistant", content="...")] * 20
    return Session(id=sid, source="cli", started_at=1.0, messages=tuple(messages))


R = REDACTED


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        (f"OPENAI_API_KEY={OPENAI_KEY}", f"OPENAI_API_KEY={R}"),
        (
            f"remote: https://x-access-token:{GITHUB_TOKEN}@github.com/o/r.git",
            f"remote: https://x-access-token:{R}@github.com/o/r.git",
        ),
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", f"aws_access_key_id = {R}"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", f"Authorization: Bearer {R}"),
        ("postgresql://hermes:hunter2hunter2@db:5432/hermes", f"postgresql://hermes:{R}@db:5432/hermes"),
        ('{"password": "correct horse battery", "user": "ann"}', f'{{"password": "{R}", "user": "ann"}}'),
        ("DB_PASSWORD='two words' make", f"DB_PASSWORD='{R}' make"),
        ("export GITHUB_TOKEN=abc123def456; echo", f"export GITHUB_TOKEN={R}; echo"),
        (
            "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\nok",
            f"key:\n{R}\nok",
        ),
        ("SLACK=xoxb-1234567890-abcdefghij", f"SLACK={R}"),
        ("key AIza" + "B" * 35, f"key {R}"),
    ],
)
def test_default_patterns_hide_credentials(text: str, hidden: str) -> None:
    assert SecretRedactor(DEFAULT_SECRET_PATTERNS).text(text) == hidden


@pytest.mark.parametrize(
    "text",
    [
        '{"output": "total 12\\ndrwxr-xr-x 2 root root 4096 a.txt", "exit_code": 0}',
        "max_tokens=4096 token_count: 123456 tokens: 512",
        "see https://github.com/org/repo and the password reset docs",
        "sk-learn is not a key; the skip list is short",
        "Bearer of bad news",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert SecretRedactor(DEFAULT_SECRET_PATTERNS).text(text) == text


def test_mined_examples_hide_credentials_but_count_as_before() -> None:
    sessions = [
        _session(
            f"s{i}",
            {"command": f"git push https://bot:{GITHUB_TOKEN}@github.com/o/r.git", "api_key": "plainvalue"},
            f"pushed with {OPENAI_KEY}",
            request=f"use token={GITHUB_TOKEN} please",
        )
        for i in range(3)
    ]
    mined = mine(sessions)
    (example,) = mined.examples
    assert example.count == 3  # de-duplication saw the real arguments
    dumped = json.dumps(example.model_dump(mode="json"))
    for secret in (GITHUB_TOKEN, OPENAI_KEY, "plainvalue"):
        assert secret not in dumped
    assert example.arguments == {
        "api_key": REDACTED,
        "command": f"git push https://bot:{REDACTED}@github.com/o/r.git",
    }
    assert example.result == f"pushed with {REDACTED}"
    assert example.context == f"use token={REDACTED} please"


def test_arguments_named_like_credentials_are_hidden_whole() -> None:
    redactor = SecretRedactor(DEFAULT_SECRET_PATTERNS)
    args = {
        "api_key": "k1",
        "DB_PASSWORD": "p w",
        "accessToken": "t1",
        "headers": {"auth-token": "t2"},
        "bypass": "yes",
        "max_tokens": "4096",
        "passes": "3",
        "items": [{"secret": "s1"}, "plain"],
    }
    assert redactor.value(args) == {
        "api_key": REDACTED,
        "DB_PASSWORD": REDACTED,
        "accessToken": REDACTED,
        "headers": {"auth-token": REDACTED},
        "bypass": "yes",
        "max_tokens": "4096",
        "passes": "3",
        "items": [{"secret": REDACTED}, "plain"],
    }


def test_raw_arguments_are_redacted_too() -> None:
    call = ToolCall(id="c", name="terminal", raw_arguments=f"curl -H 'Authorization: Bearer {OPENAI_KEY}'")
    messages = [
        Message(role="user", content="x"),
        Message(role="assistant", tool_calls=(call,)),
        Message(role="tool", content="200 OK", tool_call_id="c"),
        *[Message(role="assistant", content="...")] * 20,
    ]
    (example,) = mine([Session(id="s", source="cli", messages=tuple(messages))]).examples
    assert example.raw_arguments is not None and OPENAI_KEY not in example.raw_arguments
    assert REDACTED in example.raw_arguments


def test_config_adds_patterns_or_turns_redaction_off() -> None:
    session = _session("s", {"command": "login"}, f"corp-{'f' * 32} and {OPENAI_KEY}")
    path = mining_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"secret_patterns": ["corp-[0-9a-f]{32}"]}))
    assert mine([session]).examples[0].result == f"{REDACTED} and {REDACTED}"
    assert mine([session], config=MiningConfig(redact_secrets=False)).examples[0].result == (
        f"corp-{'f' * 32} and {OPENAI_KEY}"
    )
    path.write_text(json.dumps({"secret_patterns": ["("]}))
    with pytest.raises(ConfigError, match="secret_patterns"):
        mine([session])
