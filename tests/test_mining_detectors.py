"""detect-secrets' plugins redact kept examples, and kindling's hints never rule out what they match."""

from __future__ import annotations

import pytest

import kindling.mining.detectors as detectors
from kindling.mining.config import load_mining_config
from kindling.mining.hints import lowered
from kindling.mining.redact import SecretRedactor
from test_mining_hints import MATCHING, cut, development_texts

# At least one text each kept plugin pattern matches.
SAMPLES = [
    "AKIAIOSFODNN7EXAMPLE and aws_secret_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'",
    'token " AKCp8abcdefghijk " and " AP6abcdefghij "',
    "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + "a" * 86 + "==;",
    "https://user:p4ssw0rd@host.example/path",
    "https://acct:" + "a" * 24 + "@acct.cloudant.com and https://acct:" + "0" * 64 + "@acct.cloudant.com",
    "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0",
    "ghp_" + "a" * 36,
    "glpat-abcdefghijklmnopqrst GR1348941abcdefghijklmnopqrst glcbt-ab_abcdefghijklmnopqrst",
    "glimt-" + "a" * 25 + " glptt-" + "a" * 40 + " glagent-" + "a" * 50 + " gloas-" + "a" * 64,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
    "0123456789abcdef0123456789abcdef-us12",
    "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "sk-abcdefghijklmnopqrstT3BlbkFJabcdefghijklmnopqrst",
    "pypi-AgEIcHlwaS5vcmc" + "a" * 70 + " pypi-AgENdGVzdC5weXBpLm9yZw" + "b" * 70,
    "SG." + "a" * 22 + "." + "b" * 43,
    "xoxb-1234-abcd and https://hooks.slack.com/services/T0123ABCD/B0456EFGH/abcdefghijklmnop",
    "https://api.softlayer.com/soap/v3/" + "a" * 64,
    "sq0csp-" + "a" * 43,
    "sk_live_" + "a" * 24,
    "123456789:" + "A" * 35,
    "AC" + "a" * 32 + " SK" + "b" * 32,
]


def test_the_plugins_load_and_every_kept_one_has_a_hint() -> None:
    patterns = detectors.library_patterns()
    assert len(patterns) >= 30
    assert all(hint is not None for _regex, hint in patterns), "a plugin without a hint in PLUGIN_HINTS"
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    names = {plugin.__name__ for plugin in get_mapping_from_secret_type_to_class().values()}
    assert set(detectors.PLUGIN_HINTS) <= names  # no hint for a plugin that is gone
    for regex, _hint in patterns:
        assert any(regex.search(text) for text in SAMPLES), f"no sample for {regex.pattern[:80]}"


def test_a_hint_never_rules_out_a_text_a_plugin_matches() -> None:
    texts = SAMPLES + cut(SAMPLES) + MATCHING + development_texts()
    for regex, hint in detectors.library_patterns():
        assert hint is not None
        for text in texts:
            if regex.search(text):
                lower = lowered(text)
                assert hint(text, lower), (regex.pattern[:80], text[:120])
                assert detectors.may_hold_library_secret(text, lower)


def test_redaction_is_the_same_without_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = SAMPLES + cut(SAMPLES) + MATCHING + development_texts()[:400]
    patterns = load_mining_config().secrets()
    hinted = [SecretRedactor(patterns).text(text) for text in texts]
    unhinted = tuple((regex, None) for regex, _hint in detectors.library_patterns())
    monkeypatch.setattr(detectors, "_LOADED", unhinted)
    monkeypatch.setattr("kindling.mining.redact.may_hold_library_secret", lambda _text, _lower: True)
    assert hinted == [SecretRedactor(patterns).text(text) for text in texts]
    for sample, redacted in zip(SAMPLES, hinted, strict=False):
        assert "[REDACTED]" in redacted, sample


def test_what_plugins_redact_and_what_they_leave(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = SecretRedactor(load_mining_config().secrets())
    # A URL's password goes, the URL stays readable; a token goes whole, the words around stay.
    assert redactor.text("see https://acct:" + "a" * 24 + "@acct.cloudant.com now") == (
        "see https://acct:[REDACTED]@acct.cloudant.com now"
    )
    assert redactor.text('key " AKCp8abcdefghijk " end') == 'key " [REDACTED] " end'
    assert redactor.text("plain text, nothing secret: 12 passed") == "plain text, nothing secret: 12 passed"
    # Without the library loaded, kindling's own patterns still redact (and nothing fails).
    monkeypatch.setattr(detectors, "_LOADED", ())
    assert redactor.text("sk_live_" + "a" * 24) == "[REDACTED]"
    assert SecretRedactor([], library=False).text("xoxb-1234-abcd") == "xoxb-1234-abcd"


def test_ordinary_texts_never_load_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []
    monkeypatch.setattr(detectors, "_LOADED", None)
    monkeypatch.setattr(detectors, "_load", lambda: loads.append(1) or ())
    redactor = SecretRedactor(load_mining_config().secrets())
    for text in ("12 passed in 0.4s", "def main():\n    return 0\n", "Résumé: naïve café", "git status"):
        redactor.text(text)
    assert loads == []
    redactor.text("xoxb-1234-abcd")
    assert loads == [1]
