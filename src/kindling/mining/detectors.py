"""Credential formats of hosted services, from detect-secrets' plugins, for redacting kept examples.

detect-secrets (Yelp, Apache-2.0) keeps a plugin per service whose tokens have a known shape: Slack
tokens and webhook URLs, Stripe, SendGrid, Twilio, Mailchimp, JSON web tokens, Azure storage keys,
GitLab, npm and PyPI tokens, Telegram and Discord bot tokens, Artifactory, Square, OpenAI, AWS
access keys, and credentials in URLs. ``kindling.mining.redact`` runs their regular expressions
after kindling's own patterns (``kindling.mining.scrub_patterns``), which cover what the plugins,
written for source files, do not: passwords on command lines, unquoted cloud keys, webhook URLs of
other services, connection strings.

Importing detect-secrets takes a few tenths of a second, more than redacting a hundred examples,
so it is imported only when a text holds something one of its patterns could match: each plugin
has a hint here (``PLUGIN_HINTS``, something every match of its patterns contains, as in
``kindling.mining.hints``). A text that no hint allows is never scanned with the library and the
library is not imported for it. Left out: the plugins that flag public IP addresses, random-looking
strings (entropy) and values after generic words (``key=``, ``token:``), which kindling's own
patterns handle for text and which would flag ordinary results; and the private-key plugin, whose
match is a key's first line only (kindling's own pattern takes the whole block).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from kindling.mining.hints import HintCheck, compile_hint

__all__ = ["PLUGIN_HINTS", "library_patterns", "may_hold_library_secret"]

logger = logging.getLogger(__name__)

# A hint per plugin (by class name), true of every match of each of its patterns kept here. The
# case-insensitive patterns get "caseless" hints: a text that is not ASCII is searched with the
# folding the regex engine applies (a non-ASCII letter can match an ASCII one).
PLUGIN_HINTS: dict[str, tuple[str, Any]] = {
    "AWSKeyDetector": ("caseless", ("aws", "a3t", "abia", "acca", "akia", "asia")),
    "ArtifactoryDetector": ("match", r"AKC[a-zA-Z0-9]{10}|AP[\dA-F][a-zA-Z0-9]{8}"),
    "AzureStorageKeyDetector": ("text", ("AccountKey=",)),
    "BasicAuthDetector": ("match", r"://[^\s:/@]+:[^\s/@]+@"),
    "CloudantDetector": ("caseless", ("cloudant.com",)),
    "DiscordBotTokenDetector": ("match", r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\."),
    "GitHubTokenDetector": ("match", r"gh[pousr]_"),
    "GitLabTokenDetector": ("match", r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-|GR1348941"),
    "JwtTokenDetector": ("text", ("eyJ",)),
    "MailchimpDetector": ("match", r"-us\d"),
    "NpmDetector": ("text", ("_authToken=",)),
    "OpenAIDetector": ("text", ("T3BlbkFJ",)),
    "PypiTokenDetector": ("text", ("pypi-AgE",)),
    "SendGridDetector": ("text", ("SG.",)),
    "SlackDetector": ("caseless", ("xox", "hooks.slack.com")),
    "SoftlayerDetector": ("caseless", ("api.softlayer.com",)),
    "SquareOAuthDetector": ("text", ("sq0csp-",)),
    "StripeDetector": ("text", ("k_live_",)),
    "TelegramBotTokenDetector": ("match", r"\d{8}:[0-9A-Za-z_-]{35}"),
    "TwilioKeyDetector": ("match", r"(?:AC|SK)[a-z0-9]{32}"),
}
# Plugins left out whole, and patterns of kept plugins left out (values after generic words).
_LEFT_OUT = frozenset(
    {"IPPublicDetector", "PrivateKeyDetector", "IbmCloudIamDetector", "IbmCosHmacDetector", "KeywordDetector"}
)
_GENERIC_VALUE = "(?:=|:|:=|=>| +|::)"  # the separator the keyword-based patterns share

_HINTS: tuple[HintCheck, ...] = tuple(compile_hint(spec) for spec in PLUGIN_HINTS.values())
_LOADED: tuple[tuple[re.Pattern[str], HintCheck | None], ...] | None = None


def may_hold_library_secret(text: str, lower: str | None) -> bool:
    """True when one of the plugins' patterns could match ``text`` (``lower`` as ``hints.lowered``
    gives it); False means the library need not be imported for it."""
    return any(check(text, lower) for check in _HINTS)


def library_patterns() -> tuple[tuple[re.Pattern[str], HintCheck | None], ...]:
    """Return the plugins' patterns with their hints (None: scanned always), importing detect-secrets
    on first use; empty, with one warning logged, when it cannot be imported."""
    global _LOADED
    if _LOADED is None:
        _LOADED = _load()
    return _LOADED


def _load() -> tuple[tuple[re.Pattern[str], HintCheck | None], ...]:
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector
    except ImportError as exc:  # an install without it still redacts with kindling's own patterns
        logger.warning(
            "detect-secrets is not importable (%s); only kindling's own secret patterns apply.", exc
        )
        return ()
    hints = dict(zip(PLUGIN_HINTS, _HINTS, strict=True))
    found: list[tuple[re.Pattern[str], HintCheck | None]] = []
    plugins: list[Any] = sorted(
        get_mapping_from_secret_type_to_class().values(), key=lambda plugin: plugin.__name__
    )
    for plugin in plugins:
        name = plugin.__name__
        if name in _LEFT_OUT or not issubclass(plugin, RegexBasedDetector):
            continue
        for regex in plugin().denylist:
            if _GENERIC_VALUE in regex.pattern:
                continue
            found.append((regex, hints.get(name)))
    return tuple(found)
