"""Hints rule patterns out only where they cannot match: scrubbing and redaction stay as they were."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from kindling.mining.hints import compile_hint, hint_for, lowered
from kindling.mining.passes import truncate
from kindling.mining.personal import PersonalDataScrubber
from kindling.mining.redact import SecretRedactor
from kindling.mining.scrub_patterns import (
    DEFAULT_PATTERN_HINTS,
    DEFAULT_PERSONAL_PATTERNS,
    DEFAULT_SECRET_PATTERNS,
)
from kindling.sessions import iter_sessions

TRAJECTORIES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"

# At least one text each default pattern matches, in several shapes.
MATCHING = [
    "Write to Sophia.Martin+shop@example.co.uk or SOPHIA@EXAMPLE.COM",
    "call (415) 555-0100, 415-555-0100 or +1 415.555.0100",
    "her mobile is +44 20 7946 0958",
    "card 4111 1111 1111 1111 or 5500-0000-0000-0004",
    "the Visa ending in 3194, the card ENDING 1531",
    "my card's last four digits are 1234; LAST 4: 9876",
    "user sophia_martin_4574 asked",
    "my user id is u12345, Customer ID: C-99812, Username = jdoe7",
    "order #W9502127 and #AB12345",
    "Order ID is W1234567, order number: 998877",
    "paid with credit_card_4421847 and gift_card_12345",
    "Reservation ABC123, booking code is XYZ9876, confirmation #4WQ150",
    "lives at 760 Elm Avenue, 12 Baker St, 5 Main Street",
    "Suite 564, Apt. 3B, Apartment 12, Unit #7",
    "Houston, TX 77034 and Seattle, WA 98101-1234, New York, 10001",
    "living in Jacksonville 32278, moved from Fort Worth 76101",
    "my zip code is 12345, the ZIP should be 90210, POSTAL 98187",
    "I was born on 1990-01-31; date of birth: 3/4/1985; DOB is March 4, 1985",
    "my name is Lei Wilson; the name on the order is just Yara Silva",
    "Name: Yara Silva. First name: Lei. my full name, Lei Wilson, and more",
    "Hi, I am Yara Silva. It's Lei Wilson here. You're Mei O'Brien",
    "Customer Yara Silva, Mr. Lei Wilson, Dr. Ana Lima",
    "Yara Silva (user id: yara_silva_1234)",
    "<user_id_1> (Yara Silva, ZIP 12345) and 7 (Lei Wilson)",
    "look me up as Yara Silva; find my account under the name Lei Wilson",
    "Yara Silva, zip code 12345; Lei Wilson in zip code 54321",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    "key sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789 github_pat_abcdefghijklmnopqrstuvwxyz_0123456789",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abcdefghij",
    "AIzaSyA1234567890abcdefghijklmnopqrstuvw",
    "Authorization: Bearer abcdefghijklmnop1234",
    "postgresql://hermes:hunter22@db/hermes",
    "API_KEY=\"abcd1234efgh\" password='s3cret-pass' token: abcdef123456 PWD=qwerty1234",
    "Server=db;User Id=sa;Password=abc;Database=shop",
    "mysql -u root -pS3cretPassw0rd! shop; mysqldump -p'x y' db",
    "psql --password=hunter2; vault login --token s.abc; --client-secret 'c s'",
    "sshpass -p hunter2 ssh me@host",
    "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "curl -u admin:supersecret https://api.example.com",
    "Authorization: Basic dXNlcjpwYXNzd29yZA==",
    "https://discord.com/api/webhooks/123456789012345678/abcDEFghiJKLmnoPQRstuVWXyz0123456789",
    "https://acme.webhook.office.com/webhookb2/abc-123@def/IncomingWebhook/0a1b2c/3d4e",
    "https://hooks.zapier.com/hooks/catch/123456/abcdef/",
    "https://maker.ifttt.com/trigger/door/with/key/bFgH1234abcdXYZ",
    "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage",
    "https://example.com/f?token=abcdef123456&X-Amz-Signature=0123456789abcdef",
    "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKey=abc123def456=",
    "VAULT_TOKEN=hvs.CAESIJlU4abcdefghijklmnopqrstuvwxyz0123",
    "dop_v1_" + "a" * 64,
    "HF_TOKEN hf_abcdefghijklmnopqrstuvwxyzABCDEF",
    "Authorization: ya29.a0AfH6SMBabcdefghijklmnop",
    "stripe sk_test_abcdefghijklmnop1234 rk_live_abcdefghijklmnop",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "glpat-abcdefghijklmnopqrst",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "call +14155550134 or +442079460958",
    "mobile: 4155550134, phone number is (415) 555 0134, sms 07700900123",
    "SSN 123-45-6789, social security number is 987 65 4321",
    "IBAN GB82 WEST 1234 5698 7654 32 and DE89370400440532013000",
    "CUST-884422 cust_884423 client#55012 patient-1234567 sub_77221",
    "usr-55021 user_884422 EMP-10293",
    "ACCT-99812 loan_5512345 POL-7712345",
    "ORD-1029384 inv_55123 txn-9981234",
    "RES-5512345 booking_88123 bk-771234",
    "cus_NffrFeUfNV2Hib acct_1a2B3c4D5e6F",
    # Unicode case folding: a non-ASCII letter matches an ASCII one under IGNORECASE.
    "pa\u017f\u017fword=abcdef123456 (\u017f is a long s)",
    "\u212aey: the Kelvin sign, and Order\u00a0ID is W1234567",
]


@functools.cache
def development_texts() -> list[str]:
    """Every message text and argument text in the development data (read once)."""
    texts: set[str] = set()
    for folder in sorted(TRAJECTORIES.iterdir()) if TRAJECTORIES.is_dir() else []:
        for source in sorted(folder.iterdir()) if folder.is_dir() else []:
            for session in iter_sessions(source):
                for message in session.messages:
                    texts.add(message.content or "")
                    texts.update(str(call.arguments) for call in message.tool_calls)
    return sorted(texts)


def violations(pattern: str, spec: tuple[str, Any], texts: Iterable[str]) -> list[str]:
    """The texts ``pattern`` matches although its hint says it cannot."""
    regex = re.compile(pattern)
    check = compile_hint(spec)
    return [text for text in texts if regex.search(text) and not check(text, lowered(text))]


def test_every_default_pattern_has_a_hint() -> None:
    patterns = [p for items in DEFAULT_PERSONAL_PATTERNS.values() for p in items] + list(
        DEFAULT_SECRET_PATTERNS
    )
    assert sorted(DEFAULT_PATTERN_HINTS) == sorted(patterns)
    assert all(hint_for(pattern) is not None for pattern in patterns)
    assert hint_for(r"\bPT-\d{6}\b") is None  # a user's own pattern is always scanned


def cut(texts: Iterable[str]) -> list[str]:
    """The texts as kept examples hold them when cut (``truncate``'s marker after them), and with a "…" inside."""
    return [f"{text}\n…[truncated 12 of {len(text) + 12} chars]" for text in texts] + [
        text.replace(" ", " … ", 1) for text in texts
    ]


@pytest.mark.parametrize("pattern", sorted(DEFAULT_PATTERN_HINTS))
def test_a_hint_never_rules_out_a_text_its_pattern_matches(pattern: str) -> None:
    texts = MATCHING + cut(MATCHING) + development_texts()
    assert any(re.search(pattern, text) for text in MATCHING), "no example text for this pattern"
    assert violations(pattern, DEFAULT_PATTERN_HINTS[pattern], texts) == []


def test_a_wrong_hint_is_caught() -> None:
    email = DEFAULT_PERSONAL_PATTERNS["email"][0]
    assert violations(email, ("text", ("#",)), MATCHING)
    assert violations(DEFAULT_SECRET_PATTERNS[-1], ("text", ("password",)), MATCHING)


def test_word_hints_rule_out_only_ascii_texts() -> None:
    check = compile_hint(("word", ("pass",)))
    assert not check("nothing here", lowered("nothing here"))
    assert check("PASSWORD", lowered("PASSWORD"))
    assert check("pa\u017f\u017fword", lowered("pa\u017f\u017fword"))  # not ASCII: scanned
    # The "…" of a cut result's marker matches no letter: such a text is still ruled out ...
    cut_text = truncate("nothing here " * 10, 20)
    assert not cut_text.isascii() and not check(cut_text, lowered(cut_text))
    assert check(truncate("PASSWORD " * 10, 20), lowered(truncate("PASSWORD " * 10, 20)))
    # ... but not when it holds another character that can match a letter.
    assert check("pa\u017f\u017fword …", lowered("pa\u017f\u017fword …"))
    assert lowered("\u212aey …") is None


def test_scrubbing_and_redaction_are_unchanged_by_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = MATCHING + cut(MATCHING) + development_texts()[:400]
    scrubber = PersonalDataScrubber({"user_id": "user_id"}, DEFAULT_PERSONAL_PATTERNS)
    redactor = SecretRedactor(DEFAULT_SECRET_PATTERNS)
    hinted = [(scrubber.scrub_texts([text]), redactor.text(text)) for text in texts]
    monkeypatch.setattr("kindling.mining.personal.hint_for", lambda _pattern: None)
    monkeypatch.setattr("kindling.mining.redact.hint_for", lambda _pattern: None)
    scrubber = PersonalDataScrubber({"user_id": "user_id"}, DEFAULT_PERSONAL_PATTERNS)
    redactor = SecretRedactor(DEFAULT_SECRET_PATTERNS)
    assert hinted == [(scrubber.scrub_texts([text]), redactor.text(text)) for text in texts]
    assert any(scrubbed != [text] for (scrubbed, _), text in zip(hinted, texts, strict=True))
    assert any(hidden != text for (_, hidden), text in zip(hinted, texts, strict=True))
