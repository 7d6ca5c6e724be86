"""Pure rules of the confirmation daemon: digests, roles, whitelists, the high-risk set, names.

Nothing here touches the database or the network, so every rule is testable on its own.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any, Literal

import orjson

from kindling.confirm.folding import fold_action
from kindling.errors import InvalidNameError

Role = Literal["agent", "approver", "admin"]
ROLES: tuple[Role, ...] = ("agent", "approver", "admin")

# What each role may do. Admins may decide (the first-start admin token signs in to the web page)
# but never submit: an admin can mint tokens, so one that could submit could also mint an approver
# token and approve its own request. Only agents ask; agents can never decide.
PERMISSIONS: dict[str, frozenset[str]] = {
    "agent": frozenset({"submit", "read_own"}),
    "approver": frozenset({"decide", "read"}),
    "admin": frozenset({"decide", "read", "admin"}),
}

TOKEN_PREFIX = "kct_"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}$")
MAX_ACTION_CHARS = 200
SESSION_SECONDS = 12 * 3600
_EXPIRY_RE = re.compile(r"^[0-9]{1,12}$")


def same_secret(expected: str, presented: str | None) -> bool:
    """True when ``presented`` equals ``expected``, compared in constant time.

    Compares bytes: ``hmac.compare_digest`` raises on a str with non-ASCII characters, so a
    crafted cookie or form field (``é``) would otherwise answer 500 instead of being refused.
    """
    if not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Identity:
    """Who is calling: the token's id, its name and its role, as checked by the server."""

    token_id: str
    name: str
    role: str

    def can(self, permission: str) -> bool:
        """True when this identity's role grants ``permission``."""
        return permission in PERMISSIONS.get(self.role, frozenset())


# What ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` builds on
# every call: built once.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_LEAVES = frozenset({str, int, bool, type(None)})


def canonical_json(value: Any) -> str:
    """Return ``value`` as JSON with sorted keys and no spaces, so equal values hash equally.

    The text is the standard library's (``_CANONICAL``): audit hashes written by any version
    verify. orjson writes the same text several times faster for plain JSON values, so those take
    it (every request hashes and stores a few); anything it would write otherwise takes the
    standard encoder (see ``orjson_agrees``).
    """
    if orjson_agrees(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError:  # an integer past 64 bits, a lone surrogate
            pass
    return _CANONICAL.encode(value)


def orjson_agrees(value: Any) -> bool:
    """True when orjson writes ``value`` as the standard library's encoder does (compact, not
    ASCII-escaped), or refuses it (an integer past 64 bits, a lone surrogate: catch that).

    Only dicts with str keys, lists, tuples, str, int, bool, None and floats the two spell alike
    (orjson writes no exponent below 1e-4, and NaN and infinities as null). Exact types: orjson
    writes dataclasses, enums and subclasses where the standard encoder refuses them or writes
    them its own way.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _LEAVES:
            continue
        if kind is float:
            if item != 0.0 and not 1e-4 <= abs(item) < math.inf:
                return False
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        else:
            return False
    return True


def request_digest(action: str, description: str, details: Any, details_json: str | None = None) -> str:
    """Return the sha256 hex digest binding a decision to exactly what the approver was shown.

    ``details_json``, when given, is ``canonical_json(details)`` already written (a submit stores
    it): the digest's text is then put together around it, the same text without a second pass
    over the details.
    """
    if details_json is None:
        payload = canonical_json({"action": action, "description": description, "details": details})
    else:  # the keys in sorted order, as canonical_json writes them
        payload = (
            f'{{"action":{canonical_json(action)},"description":{canonical_json(description)},'
            f'"details":{details_json}}}'
        )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def new_token() -> str:
    """Return a fresh random bearer token (shown once, stored only as a hash)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(raw: str) -> str:
    """Return the sha256 hex digest under which a token is stored."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def csrf_token(secret: str, token_id: str) -> str:
    """Return the CSRF token of a web session: an HMAC of the signed-in token's id."""
    return hmac.new(secret.encode("utf-8"), f"csrf:{token_id}".encode(), hashlib.sha256).hexdigest()


def session_cookie(secret: str, token_id: str, expires_at: int, nonce: str | None = None) -> str:
    """Return a web sign-in cookie: the token's id, an expiry, a fresh nonce and an HMAC over them.

    The raw bearer token never goes into the cookie, so a leaked cookie is not an API token and
    stops working at ``expires_at`` (or as soon as the token is revoked). The nonce makes every
    sign-in's cookie, and so its CSRF token, different.
    """
    nonce = nonce or secrets.token_hex(8)
    signed = f"session:{token_id}:{expires_at}:{nonce}".encode()
    mac = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return f"{token_id}.{expires_at}.{nonce}.{mac}"


def read_session_cookie(secret: str, value: str | None, now: float) -> str | None:
    """Return the token id a sign-in cookie stands for, or None when it is forged or expired."""
    found = read_session(secret, value, now)
    return found[0] if found else None


def read_session(secret: str, value: str | None, now: float) -> tuple[str, str] | None:
    """Return ``(token_id, nonce)`` of a sign-in cookie, or None when it is forged or expired.

    The nonce names the sign-in on the server, where signing out ends it.
    """
    parts = (value or "").split(".")
    # ASCII digits only, and few: str.isdigit() accepts "²", and int() refuses 5,000 digits.
    if len(parts) != 4 or not _EXPIRY_RE.match(parts[1]) or len(parts[0]) > 40 or len(parts[2]) > 32:
        return None
    token_id, expires, nonce, _mac = parts
    if int(expires) <= now:
        return None
    if not same_secret(session_cookie(secret, token_id, int(expires), nonce), value):
        return None
    return token_id, nonce


def login_csrf_token(secret: str, nonce: str) -> str:
    """Return the CSRF token of the sign-in form, bound to the pre-sign-in cookie's ``nonce``."""
    return hmac.new(secret.encode("utf-8"), f"login:{nonce}".encode(), hashlib.sha256).hexdigest()


def check_csrf(secret: str, token_id: str, presented: str | None) -> bool:
    """True when ``presented`` is the CSRF token of ``token_id`` (compared in constant time)."""
    return same_secret(csrf_token(secret, token_id), presented)


def validate_token_name(name: str) -> str:
    """Return ``name`` when it is a safe token name; raise InvalidNameError otherwise."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidNameError(
            f"Token name {name!r} is not allowed: use 1-64 letters, digits, '_', '.', '@', ':' or '-', "
            "starting with a letter or digit.",
            name=str(name),
            kind="token",
        )
    return name


def validate_role(role: str) -> Role:
    """Return ``role`` when it is one of agent/approver/admin; raise InvalidNameError otherwise."""
    if role not in ROLES:
        raise InvalidNameError(
            f"Role {role!r} is not one of {', '.join(ROLES)}.", name=str(role), kind="role"
        )
    return role


def validate_action(action: str) -> str:
    """Return ``action`` stripped when it is a usable action name; raise InvalidNameError otherwise."""
    cleaned = action.strip() if isinstance(action, str) else ""
    # Control and format characters (bidi overrides, zero-width joiners) could make the name an
    # approver reads differ from the one that is stored and matched.
    if (
        not cleaned
        or len(cleaned) > MAX_ACTION_CHARS
        or any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in cleaned)
    ):
        raise InvalidNameError(
            f"Action {action!r} must be 1-{MAX_ACTION_CHARS} printable characters.",
            name=str(action),
            kind="action",
        )
    return cleaned


def normal_action(action: str) -> str:
    """Return ``action`` folded for comparison (``folding.fold_action``: NFKC, case, separators)."""
    return fold_action(action)


def is_high_risk(action: str, high_risk: Iterable[str]) -> bool:
    """True when ``action`` is in the high-risk set, which no whitelist can auto-approve.

    Compared folded, so ``Deploy-Production``, ``ＤＥＰＬＯＹ_PRODUCTION`` or ``dеploy_production``
    (Cyrillic ``е``) cannot slip past a catch-all rule by spelling.
    """
    return fold_action(action) in _folded(frozenset(high_risk))


def marked_high_risk(action: str, details: Any, high_risk: Iterable[str]) -> bool:
    """True when the request is high-risk: its action is in the high-risk set, or the agent that asked
    marked it so (``details["risk"] == "high"``, as kindling's approval hooks do for a command their
    danger check flagged). An agent can only raise a request's risk this way, never lower it."""
    if isinstance(details, dict) and details.get("risk") == "high":
        return True
    return is_high_risk(action, high_risk)


@lru_cache(maxsize=64)
def _folded(actions: frozenset[str]) -> frozenset[str]:
    # The high-risk set comes from the settings: folded once, not on every submit.
    return frozenset(fold_action(a) for a in actions)


def rule_matches(rule_action: str, rule_session: str | None, action: str, session_key: str | None) -> bool:
    """True when a whitelist rule covers ``action`` in ``session_key``.

    A rule's action may be a glob (``read_*``); a rule without a session applies everywhere.
    """
    if rule_session is not None and rule_session != session_key:
        return False
    return fnmatchcase(action, rule_action)


def audit_hash(
    prev_hash: str, seq: int, at: float, event: str, request_id: str | None, actor: str | None, data: str
) -> str:
    """Return the hash of one audit row, chained to the row before it through ``prev_hash``."""
    fields = [seq, repr(float(at)), event, request_id, actor, data]
    try:  # integers and strings, on which orjson writes canonical_json's text (see orjson_agrees)
        body = orjson.dumps(fields).decode()
    except orjson.JSONEncodeError:  # a lone surrogate, say
        body = _CANONICAL.encode(fields)
    return hashlib.sha256(f"{prev_hash}\n{body}".encode()).hexdigest()
