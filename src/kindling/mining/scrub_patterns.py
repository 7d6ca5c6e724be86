"""What scrubbing looks for, as data: credentials to redact and personal data to replace.

Each default pattern is declared once, with its *hint* (something every match contains, so a text
without it is not scanned with the pattern; see ``kindling.mining.hints``) and, for personal data,
an optional *check* a match must pass (the mod-97 check of an IBAN; card numbers always pass the
Luhn check, whoever wrote the pattern). The tables ``kindling.mining.config`` serves
(``DEFAULT_SECRET_PATTERNS``, ``DEFAULT_PERSONAL_PATTERNS``, ``DEFAULT_PERSONAL_KEYS``) and the hint
and check tables are derived from these declarations. Credential formats of hosted services come
from detect-secrets' plugins besides these (``kindling.mining.detectors``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DEFAULT_PATTERN_CHECKS",
    "DEFAULT_PATTERN_HINTS",
    "DEFAULT_PERSONAL_KEYS",
    "DEFAULT_PERSONAL_PATTERNS",
    "DEFAULT_SECRET_PATTERNS",
]

Hint = tuple[str, Any]

# -- credentials ----------------------------------------------------------------------------------
# A credential's name and the separator before its value: API_KEY=, "password": , token: ...
_SECRET_NAME = (
    r"(?i)(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?key|token|password|passwd|pwd)[\"']?\s*[:=]"
)
# A command-line value: quoted up to its closing quote, else up to a space; never a variable ($X).
_ARG_VALUE = r"(?!\$|\[REDACTED\])(?P<secret>'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"]+)"
_CREDENTIAL_WORDS: Hint = ("word", ("api", "secret", "access", "token", "pass", "pwd"))
# (pattern, hint). A group named ``secret`` limits the replacement to that group, so the name
# before it stays readable; any other pattern is replaced whole.
_SECRETS: tuple[tuple[str, Hint], ...] = (
    (
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
        ("text", ("-----BEGIN ",)),
    ),
    (r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}", ("text", ("sk-",))),
    (r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})", ("match", r"gh[pousr]_|github_pat_")),
    (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", ("text", ("AKIA", "ASIA"))),
    (r"\bxox[abposr]-[A-Za-z0-9-]{10,}", ("text", ("xox",))),
    (r"\bAIza[0-9A-Za-z_-]{35}", ("text", ("AIza",))),
    (r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{16,})", ("word", ("bearer",))),
    # The password of a URL or connection string (scheme://user:password@host, redis://:password@host).
    (r"://[^/\s:@]*:(?P<secret>[^@\s/]+)@", ("text", ("://",))),
    # name = value: a quoted value up to its closing quote, else up to a space or separator.
    (rf"{_SECRET_NAME}\s*\"(?!\[REDACTED\])(?P<secret>[^\"\n]{{4,}})\"", _CREDENTIAL_WORDS),
    (rf"{_SECRET_NAME}\s*'(?!\[REDACTED\])(?P<secret>[^'\n]{{4,}})'", _CREDENTIAL_WORDS),
    (rf"{_SECRET_NAME}[\"']?(?!\[REDACTED\])(?P<secret>[^\s\"',;]{{6,}})", _CREDENTIAL_WORDS),
    # A password in a connection string however short: Server=db;User Id=sa;Password=abc;
    (
        r"(?i)(?:^|[;\s\"'])(?:password|passwd|pwd)\s*=\s*(?!\[REDACTED\])(?P<secret>[^;'\"\s]+)(?=;)",
        ("caseless", ("passw", "pwd")),
    ),
    # mysql -u root -pS3cret, mysqldump -p'S3cret' (the password glued to -p).
    (
        r"(?i)\b(?:mysql\w*|mariadb\w*)\b[^\n|;&]*?\s-p(?!\[REDACTED\])(?P<secret>'[^'\n]*'|\"[^\"\n]*\"|[^\s'\"]+)",
        ("word", ("mysql", "mariadb")),
    ),
    # --password=S3cret, --password S3cret, --token T, --client-secret S, sshpass -p S.
    (
        r"(?i)(?:^|\s)--?(?:password|passwd|pass|pwd|token|auth-token|api-?key|secret|client-secret"
        rf"|secret-key|access-key|secret-access-key)(?:=|\s+){_ARG_VALUE}",
        ("caseless", ("-pass", "-pwd", "-token", "-api", "-secret", "-access-key")),
    ),
    (rf"(?i)\bsshpass\s+-p\s*{_ARG_VALUE}", ("word", ("sshpass",))),
    # aws configure set aws_secret_access_key wJalr..., AWS_SESSION_TOKEN ...
    (
        r"(?i)\b(?:aws_secret_access_key|aws_secret_key|aws_session_token|secret_access_key)\b[\"']?"
        r"(?:\s*[:=]\s*|\s+)[\"']?(?!\[REDACTED\])(?P<secret>[A-Za-z0-9/+=]{16,})",
        ("caseless", ("secret_access_key", "aws_secret_key", "aws_session_token")),
    ),
    # curl -u user:password, Authorization: Basic dXNlcjpwYXNz
    (
        r"(?:^|\s)(?:-u|--user)\s+['\"]?[^\s:'\"]+:(?!//|\[REDACTED\])(?P<secret>[^\s'\"]+)",
        ("text", ("-u", "--user")),
    ),
    (r"(?i)\bauthorization:\s*basic\s+(?P<secret>[A-Za-z0-9+/=]{8,})", ("caseless", ("authorization",))),
    # Webhook URLs whose path is the secret (Slack's comes from detect-secrets).
    (r"(?i)\bdiscord(?:app)?\.com/api/webhooks/\d+/(?P<secret>[\w-]{16,})", ("word", ("discord",))),
    (r"(?i)\.webhook\.office\.com/webhook\w*/(?P<secret>[^\s'\"]+)", ("word", ("webhook.office",))),
    (r"(?i)\bhooks\.zapier\.com/hooks/catch/(?P<secret>[\w/]+)", ("word", ("zapier",))),
    (r"(?i)\bmaker\.ifttt\.com/trigger/[\w-]+/with/key/(?P<secret>[\w-]+)", ("word", ("ifttt",))),
    (r"(?i)\bapi\.telegram\.org/bot(?P<secret>\d+:[\w-]+)", ("word", ("telegram",))),
    # Secrets in a URL's query: ?token=, &sig=, X-Amz-Signature=, ?key=...
    (
        r"(?i)[?&](?:token|access_token|api_?key|key|secret|client_secret|sig|signature|x-amz-signature"
        r"|x-amz-security-token|x-goog-signature|password|auth)=(?!\[REDACTED\])(?P<secret>[^&\s'\"#]{8,})",
        ("caseless", ("token=", "key=", "secret=", "sig=", "signature=", "password=", "auth=")),
    ),
    # Cloud and service keys detect-secrets does not know.
    (
        r"(?i)\bSharedAccess(?:Key|Signature)=(?!\[REDACTED\])(?P<secret>[^;\s'\"]+)",
        ("word", ("sharedaccess",)),
    ),
    (r"\bhv[sb]\.[A-Za-z0-9_-]{24,}", ("text", ("hvs.", "hvb."))),
    (r"\bdop_v1_[a-f0-9]{64}\b", ("text", ("dop_v1_",))),
    (r"\bhf_[A-Za-z0-9]{30,}\b", ("text", ("hf_",))),
    (r"\bya29\.[0-9A-Za-z_-]{20,}", ("text", ("ya29.",))),
    (r"\b[rs]k_(?:live|test)_[0-9a-zA-Z]{16,}", ("text", ("k_live_", "k_test_"))),
    (r"\bnpm_[A-Za-z0-9]{36}\b", ("text", ("npm_",))),
    (r"\bglpat-[A-Za-z0-9_-]{20,}", ("text", ("glpat-",))),
    # A JSON web token whole (detect-secrets' pattern stops before the signature).
    (r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ("text", ("eyJ",))),
)

# -- personal data --------------------------------------------------------------------------------
# Field names (lower snake case after normalising userId/User-ID; shell globs allowed) whose values
# are personal, and the placeholder type each gets.
DEFAULT_PERSONAL_KEYS: dict[str, str] = {
    **dict.fromkeys(("user_id", "userid", "username", "user_name", "login"), "user_id"),
    **dict.fromkeys(("customer_id", "client_id_number", "member_id", "passenger_id"), "customer_id"),
    **dict.fromkeys(("account_id", "account_number", "account_no", "iban"), "account_id"),
    **dict.fromkeys(("order_id", "order_ids", "orders", "order_number"), "order_id"),
    **dict.fromkeys(
        (
            "reservation_id",
            "reservation_ids",
            "reservations",
            "booking_id",
            "booking_reference",
            "confirmation_code",
        ),
        "reservation_id",
    ),
    **dict.fromkeys(
        ("payment_id", "payment_method_id", "payment_method_ids", "payment_methods_id", "payment_ids"),
        "payment_id",
    ),
    **dict.fromkeys(("email", "email_address", "e_mail", "*_email"), "email"),
    **dict.fromkeys(("phone", "phone_number", "mobile", "mobile_number", "telephone", "*_phone"), "phone"),
    **dict.fromkeys(
        (
            "first_name",
            "last_name",
            "full_name",
            "middle_name",
            "given_name",
            "family_name",
            "surname",
            "firstname",
            "lastname",
            "customer_name",
            "passenger_name",
            "cardholder_name",
        ),
        "name",
    ),
    **dict.fromkeys(
        (
            "address1",
            "address2",
            "address_line1",
            "address_line_1",
            "address_line2",
            "address_line_2",
            "street",
            "street_address",
            "home_address",
        ),
        "address",
    ),
    **dict.fromkeys(("zip", "zipcode", "zip_code", "postal_code", "postcode"), "zip"),
    **dict.fromkeys(("dob", "date_of_birth", "birth_date", "birthdate", "birthday"), "date_of_birth"),
    **dict.fromkeys(
        ("card_number", "credit_card_number", "cc_number", "pan", "last_four", "last4", "card_last_four"),
        "card_number",
    ),
    **dict.fromkeys(
        ("ssn", "social_security_number", "national_id", "passport_number", "passport"), "national_id"
    ),
}

_NAME = r"[A-Z][a-z]+(?:['’][A-Z]?[a-z]+)?"
_STREET_SUFFIX = (
    r"(?:Street|St|Avenue|Ave|Road|Rd|Lane|Ln|Drive|Dr|Boulevard|Blvd|Way|Court|Ct|Place|Pl|Terrace|Parkway"
    r"|Pkwy|Circle|Cir|Highway|Hwy|Square|Sq)\b"
)
_NAME_PAIR: Hint = ("match", r"[a-z] [A-Z][a-z]")  # the "{_NAME} {_NAME}" of a first and last name
_DIGITS_5: Hint = ("match", r"\s\d{5}")  # the space before a zip code
# Prefixes that say what an id is, inside commands and text: CUST-884422, ord_1029384, USR#55021.
_ID_PREFIXES = {
    "customer_id": r"cust(?:omer)?|cus|client|cli|mbr|member|pat(?:ient)?|sub(?:scriber)?",
    "user_id": r"usr|user|uid|emp(?:loyee)?",
    "account_id": r"acct|account|acc|loan|pol(?:icy)?",
    "order_id": r"ord(?:er)?|inv(?:oice)?|txn",
    "reservation_id": r"res|rsv|booking|bk",
}


def _prefixed_id(kind: str) -> tuple[str, str, Hint, None]:
    pattern = rf"(?i)(?<![\w-])(?:{_ID_PREFIXES[kind]})[-_#]?\d{{5,}}(?![\w-])"
    return kind, pattern, ("match", r"[A-Za-z][-_#]?\d{5}"), None


# (placeholder type, pattern, hint, check or None). Patterns match shapes that are personal, never
# paths or code: "file_name_2024.py" is no user id. A group named ``value`` is the personal part
# ("my ID is" stays).
_PERSONAL: tuple[tuple[str, str, Hint, str | None], ...] = (
    (
        "email",
        r"(?<![\w.+-])(?!git@)[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
        ("text", ("@",)),
        None,
    ),
    (
        "phone",
        r"(?<![\w+.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w.-]\d|\w)",
        ("match", r"\d{3}[ .-]\d{4}"),
        None,
    ),
    ("phone", r"(?<![\w.-])\+\d{1,3}(?:[ ]\d{2,4}){2,4}\b", ("text", ("+",)), None),
    # E.164 without separators: +14155550134
    ("phone", r"(?<![\w+])\+[1-9]\d{7,14}(?![\w.]\d|\d)", ("text", ("+",)), None),
    # digits after a word that says they are a phone number: "mobile: 4155550134"
    (
        "phone",
        r"(?i:\b(?:phone|tel|telephone|mobile|cell|whatsapp|sms)\b(?:\s*(?:number|no\.?|#))?\s*(?:is|:|=)?\s*)"
        r"(?P<value>\+?\d[\d ().-]{6,16}\d)",
        ("word", ("phone", "tel", "mobile", "cell", "whatsapp", "sms")),
        None,
    ),
    (
        "card_number",
        r"(?<![\w.-])[2-6]\d{3}(?:[ -]?\d{4}){2}[ -]?\d{1,7}(?![\w.-]\d|\w)",
        ("match", r"[2-6]\d{3}"),
        None,
    ),
    # the last four digits: "Visa ending in 3194", "card ending 1531"
    ("card_number", r"(?i:\bending(?:\s+in)?\s+)(?P<value>\d{4})\b", ("word", ("ending",)), None),
    (
        "card_number",
        r"(?i:\blast\s+(?:four|4)(?:\s+digits)?\s*(?:is|are|:)?\s*)(?P<value>\d{4})\b",
        ("word", ("last",)),
        None,
    ),
    # US Social Security numbers: never area 000, 666 or 9xx, group 00 or serial 0000.
    (
        "national_id",
        r"(?<![\w-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\w-])",
        ("match", r"\d-\d\d-\d"),
        None,
    ),
    (
        "national_id",
        r"(?i:\b(?:ssn|social\s+security(?:\s+(?:number|no\.?))?)\b\W{0,3}(?:is\s+)?)(?P<value>\d{3}[ -]?\d{2}[ -]?\d{4})\b",
        ("word", ("ssn", "social")),
        None,
    ),
    # IBANs (country, check digits, account), printed whole or in groups of four; mod-97 checked.
    (
        "account_id",
        r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b",
        ("match", r"[A-Z]{2}\d{2}"),
        "iban",
    ),
    (
        "user_id",
        # first_last_1234, the shape of user ids in customer-service data, in text or a result
        # (not in a file name, nor a name code uses: test_case_1234, tmp_dir_2024).
        r"(?<![\w/.\\-])(?!(?:test|tmp|temp|var|get|set|run|file|data|func|step|case|build|make|log)_)"
        r"[a-z]+_[a-z]+_\d{4}(?!\w|[./\\-]\w)",
        ("match", r"_[a-z]+_\d{4}"),
        None,
    ),
    (
        "user_id",
        r"(?i:\b(?:user\s*id|user\s*name|username|customer\s*id|member\s*id|my\s+id)\b\s*(?:is|:|=|#)?\s*)"
        r"(?P<value>(?=[\w.-]*\d)[A-Za-z0-9](?:[\w-]|\.(?=\w))*)",
        ("word", ("user", "customer", "member", "my")),
        None,
    ),
    *(_prefixed_id(kind) for kind in _ID_PREFIXES),
    ("customer_id", r"\bcus_[A-Za-z0-9]{10,}\b", ("text", ("cus_",)), None),
    ("account_id", r"\bacct_[A-Za-z0-9]{10,}\b", ("text", ("acct_",)), None),
    ("order_id", r"(?<![\w/])#[A-Z]{1,3}\d{5,}\b", ("text", ("#",)), None),
    (
        "order_id",
        r"(?i:\border\s*(?:id|number|no\.?|#)\s*(?:is|:)?\s*)(?P<value>#?(?=[\w-]*\d)[A-Za-z0-9][\w-]*)",
        ("word", ("order",)),
        None,
    ),
    (
        "payment_id",
        r"\b(?:credit_card|debit_card|gift_card|paypal|bank_account|apple_pay|certificate)_\d{4,}\b",
        ("match", r"_\d{4}"),
        None,
    ),
    (
        "reservation_id",
        r"(?i:\b(?:reservation|booking|confirmation)\s*(?:id|number|code|no\.?|#)?\s*(?:is|:)?\s*)"
        r"(?P<value>(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6,8})\b",
        ("word", ("reservation", "booking", "confirmation")),
        None,
    ),
    ("address", rf"\b\d{{1,6}}\s+(?:[A-Z][a-z]+\s+){{0,3}}{_STREET_SUFFIX}", ("match", r"\d\s"), None),
    (
        "address",
        r"\b(?:Suite|Apt\.?|Apartment|Unit)\s+#?\d+[A-Z]?\b",
        ("text", ("Suite", "Apt", "Apartment", "Unit")),
        None,
    ),
    # after a state code or a city: "Seattle, WA 98101", "New York, 10001"
    ("zip", r"(?:\b[A-Z]{2,3},?|\b[A-Z][a-z]+,)\s+(?P<value>\d{5}(?:-\d{4})?)\b", _DIGITS_5, None),
    # "living in Jacksonville 32278"
    ("zip", r"\b(?:in|from|at)\s+(?:[A-Z][a-z]+\s+){1,3}(?P<value>\d{5}(?:-\d{4})?)\b", _DIGITS_5, None),
    # "zip code is 12345", "the ZIP should be 90210", "my zip code, 98187"
    (
        "zip",
        r"(?i:\b(?:zip|postal|post)(?:\s*code)?\b[^\d.?!\n<(\[{]{0,25}?)(?<![\d-])(?P<value>\d{5}(?:-\d{4})?)\b",
        ("word", ("zip", "post")),
        None,
    ),
    (
        "date_of_birth",
        r"(?i:\b(?:born(?:\s+on)?|date\s+of\s+birth|dob|birth\s*date|birthday)\b\W{0,3}(?:is\s+|was\s+)?)"
        r"(?P<value>\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}|[A-Z][a-z]+\s+\d{1,2},?\s+\d{4}"
        r"|\d{1,2}\s+[A-Z][a-z]+\s+\d{4})",
        ("word", ("born", "date", "dob", "birth")),
        None,
    ),
    # "my name is X Y", "the name on the order is just X Y", "Name: X"
    (
        "name",
        r"\b[Nn]ame\b[^.?!:\n]{0,30}?\b(?:is|was)\s+(?:(?:just|definitely|actually|simply|still)\s+)?"
        rf"(?P<value>{_NAME}(?:[ -]{_NAME}){{0,2}})",
        ("text", ("ame",)),
        None,
    ),
    # "Name: X Y", "First name: X", "my full name, Lei Wilson, and ...", "name+zip: X Y"
    # (not a lower-case "name:" key of YAML or code)
    (
        "name",
        r"(?:\bName:|\b(?:[Mm]y|[Ff]ull|[Ff]irst|[Ll]ast|[Cc]ustomer|[Uu]ser)\s+name\b[^.?!\n]{0,40}?[,:]"
        r"|\b[Nn]ame\b[^.?!:\n]{1,40}?:)\s+"
        rf"(?P<value>{_NAME}(?: {_NAME}){{0,2}})\b",
        ("text", ("ame",)),
        None,
    ),
    (
        "name",
        rf"(?:\bI am|\bI'm|\bI’m|\b[Tt]his is|\b[Ii]t's|\b[Ii]t’s|\b[Yy]ou are|\b[Yy]ou're|\b[Yy]ou’re)\s+"
        rf"(?P<value>{_NAME} {_NAME})\b",
        _NAME_PAIR,
        None,
    ),
    (
        "name",
        r"\b(?:[Cc]ustomer|[Uu]ser|[Cc]lient|[Pp]assenger|[Mm]r\.?|[Mm]rs\.?|[Mm]s\.?|[Dd]r\.),?\s+"
        rf"(?P<value>{_NAME} {_NAME})\b",
        _NAME_PAIR,
        None,
    ),
    # "X Y (user_id: ...)", "<user_id_1> (X Y, ZIP ...)"
    ("name", rf"(?P<value>{_NAME} {_NAME})(?=\s*\((?:user|customer)[ _]?id\b)", _NAME_PAIR, None),
    ("name", rf"(?:>|\d)\s*\((?P<value>{_NAME} {_NAME})[,)]", _NAME_PAIR, None),
    # "look me up as X Y", "find my account under X Y"
    (
        "name",
        r"\b(?:look (?:me|it|my account) up|find (?:me|my account)|search for me|under the name)\s+"
        rf"(?:(?:as|under|by|with)\s+)?(?:the name\s+)?(?P<value>{_NAME} {_NAME})\b",
        _NAME_PAIR,
        None,
    ),
    # "X Y, zip code 12345" / "X Y in zip code 12345"
    (
        "name",
        rf"(?P<value>{_NAME} {_NAME})(?=,?\s+(?:(?:in|with|and|at|from)\s+)?(?:the\s+)?(?:zip|postal)\b)",
        _NAME_PAIR,
        None,
    ),
)

#: Credentials hidden in kept examples (see ``kindling.mining.redact``).
DEFAULT_SECRET_PATTERNS: tuple[str, ...] = tuple(pattern for pattern, _hint in _SECRETS)
#: Personal-data patterns per placeholder type (see ``kindling.mining.personal``).
DEFAULT_PERSONAL_PATTERNS: dict[str, tuple[str, ...]] = {}
for _kind, _pattern, _hint, _check in _PERSONAL:
    DEFAULT_PERSONAL_PATTERNS[_kind] = (*DEFAULT_PERSONAL_PATTERNS.get(_kind, ()), _pattern)
#: What a text must hold for each default pattern to match in it (``kindling.mining.hints``): texts
#: without it are not scanned with that pattern, which is most of what scrubbing kept examples costs.
DEFAULT_PATTERN_HINTS: dict[str, Hint] = {
    **{pattern: hint for _kind, pattern, hint, _check in _PERSONAL},
    **dict(_SECRETS),
}
#: The check a default personal-data pattern's matches must pass, by name (``iban``; see
#: ``kindling.mining.personal``).
DEFAULT_PATTERN_CHECKS: dict[str, str] = {
    pattern: check for _kind, pattern, _hint, check in _PERSONAL if check
}
