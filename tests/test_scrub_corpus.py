"""Secrets and personal data planted in recorded sessions never reach a template or a warm-up.

Each shape is planted in a session of a real Hermes ``state.db`` on disk three times: in the user's
request, in the command the agent ran and in the command's output. ``build_template`` mines it,
and ``warm`` builds warm-ups from it in every style and message format; the planted value must be
in none of them, while the command around it survives (the example is kept, only the value goes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kindling.templates import build_template
from kindling.warmup.build import STYLES
from kindling.warmup.warm import warm
from recorded_sessions import call, session, write_state_db

# (what it is, the text planted, the value that must not come out)
SHAPES: list[tuple[str, str, str]] = [
    # credentials on command lines and in connection strings
    ("mysql -p", "mysql -u root -pS3cretPassw0rd! shop", "S3cretPassw0rd!"),
    ("mysqldump -p'…'", "mysqldump -u admin -p'Tr1cky Pass' shop", "Tr1cky Pass"),
    ("--password=", "psql --password=Hunter2Hunter2 -U app", "Hunter2Hunter2"),
    ("--password VALUE", "influx auth --password Qw3rtyUiop99", "Qw3rtyUiop99"),
    ("--token VALUE", "vault login --token hvsToken8812abc", "hvsToken8812abc"),
    ("sshpass -p", "sshpass -p 'Sup3rS3cret' ssh deploy@10.0.0.5", "Sup3rS3cret"),
    ("PGPASSWORD=", "PGPASSWORD=Pg5ecretValue psql -h db", "Pg5ecretValue"),
    ("postgresql URL", "psql postgresql://app:Db5ecretPass@db.internal:5432/prod", "Db5ecretPass"),
    ("redis URL", "redis-cli -u redis://:R3disPassw0rd@cache:6379 ping", "R3disPassw0rd"),
    ("mongodb+srv URL", "mongosh mongodb+srv://svc:M0ngoPassw0rd@cluster0.example.net/db", "M0ngoPassw0rd"),
    ("ADO.NET string", "sqlcmd -S 'Server=db;User Id=sa;Password=Qz7k;Database=shop'", "Qz7k"),
    ("curl -u", "curl -u admin:CurlPassw0rd9 https://api.example.com/v1", "CurlPassw0rd9"),
    ("Basic header", "curl -H 'Authorization: Basic YWRtaW46c2VjcmV0cGFzcw==' x", "YWRtaW46c2VjcmV0cGFzcw"),
    ("Bearer header", "curl -H 'Authorization: Bearer abcdefghijklmnop123456' x", "abcdefghijklmnop123456"),
    ("query token", "curl 'https://api.example.com/v1/x?access_token=QueryTok3n998877'", "QueryTok3n998877"),
    # webhook URLs
    (
        "Slack webhook",
        "curl -X POST https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/cccccccccccccccccccccccc",
        "cccccccccccccccccccccccc",
    ),
    (
        "Discord webhook",
        "curl https://discord.com/api/webhooks/123456789012345678/DiscordHookSecret_abc123XYZ",
        "DiscordHookSecret_abc123XYZ",
    ),
    (
        "Teams webhook",
        "curl https://contoso.webhook.office.com/webhookb2/7f3c1a2b-teams@1111/IncomingWebhook/ab/99",
        "7f3c1a2b-teams@1111",
    ),
    (
        "Telegram bot URL",
        "curl https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/x",
        "AAHdqTcv",
    ),
    # cloud and service keys
    (
        "aws configure",
        "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI",
    ),
    ("AWS key id", "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("AWS secret env", "export AWS_SECRET_ACCESS_KEY=abcDEF123ghiJKL456mnoPQR789stu", "abcDEF123ghiJKL456"),
    (
        "Azure storage key",
        "az storage blob list --connection-string 'AccountKey=" + "Az" * 43 + "==;'",
        "AzAzAzAz",
    ),
    ("Azure SAS key", "az servicebus --conn 'SharedAccessKey=SasKey0123456789abc='", "SasKey0123456789abc"),
    (
        "Google API key",
        "curl 'https://maps.example.com/x?k=AIzaSyA1234567890abcdefghijklmnopqrstuv'",
        "AIzaSyA12345",
    ),
    (
        "GitHub token",
        "git clone https://x:ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r",
        "ghp_abcdefgh",
    ),
    ("GitLab token", "glab auth login --stdin <<< glpat-GitLabTok3nAbcdefghij", "glpat-GitLabTok3n"),
    ("Stripe key", "export STRIPE=sk_live_StripeSecretKey00001234", "StripeSecretKey0000"),
    ("SendGrid key", "export SENDGRID=SG." + "s" * 22 + "." + "g" * 43, "ggggggggggggggg"),
    ("Slack token", "export SLACK=xoxb-1234567890-abcdefghijklmn", "xoxb-1234567890"),
    ("OpenAI key", "export OPENAI_API_KEY=sk-proj-OpenAiSecretKey0123456789ab", "OpenAiSecretKey"),
    (
        "JSON web token",
        "curl -H 'X-Auth: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlMTIzNDU2' x",
        "eyJzdWIiOiJhbGljZSJ9",
    ),
    (
        "npm token",
        "npm config set //registry.npmjs.org/:_authToken=npm_NpmTok3nabcdefghijklmnopqrstuvwxyz",
        "NpmTok3n",
    ),
    (
        "Hugging Face token",
        "HF_TOKEN hf_HuggingFaceTok3nabcdefghijklmnop python train.py",
        "HuggingFaceTok3n",
    ),
    (
        "private key",
        "cat id_rsa: -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjE",
    ),
    # personal data
    ("E.164 phone", "notify --sms +14155550134 'deploy done'", "4155550134"),
    ("formatted phone", "crm call --to '(415) 555-0199'", "555-0199"),
    ("e-mail", "mail -s report jane.doe@example.com < out.txt", "jane.doe@example.com"),
    ("SSN", "grep '123-45-6789' hr/records.csv", "123-45-6789"),
    ("IBAN grouped", "pay --iban 'GB82 WEST 1234 5698 7654 32'", "5698 7654"),
    ("IBAN compact", "pay --to DE89370400440532013000", "DE89370400440532013000"),
    ("customer id", "psql -c \"select * from orders where customer = 'CUST-884422'\"", "884422"),
    ("order id", "grep ORD-1029384 logs/app.log", "1029384"),
    ("account id", "billing suspend ACCT-7712345", "7712345"),
    ("Stripe customer", "stripe customers retrieve cus_NffrFeUfNV2Hib", "NffrFeUfNV2Hib"),
    ("card number", "charge --card '4111 1111 1111 1111'", "4111 1111 1111 1111"),
    ("street address", "ship --to '760 Elm Avenue, Springfield'", "760 Elm Avenue"),
    ("date of birth", "echo 'born on 1990-01-31' >> profile.txt", "1990-01-31"),
    ("name", "echo 'my name is Yara Silva' > greeting.txt", "Yara Silva"),
]


def recorded_store(tmp_path: Path) -> Path:
    sessions = []
    for index, (what, text, _value) in enumerate(SHAPES):
        sessions.append(
            session(
                f"shape-{index:02d}",
                f"Run this for me ({what}): {text}",
                [call("terminal", {"command": text}, f"ran: {text}\nexit 0")],
            )
        )
    return write_state_db(tmp_path / "state.db", sessions)


def test_the_corpus_holds_forty_shapes() -> None:
    assert len(SHAPES) >= 40
    assert len({what for what, _text, _value in SHAPES}) == len(SHAPES)
    for _what, text, value in SHAPES:
        assert value in text


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> str:
    import os

    home = tmp_path_factory.mktemp("scrub-home")
    old = {key: os.environ.get(key) for key in ("KINDLING_HOME", "HERMES_HOME")}
    os.environ["KINDLING_HOME"] = str(home / "kindling")
    os.environ["HERMES_HOME"] = str(home / "hermes")
    try:
        template = build_template("scrubbed", [recorded_store(home)], min_messages=1, per_tool=100)
        shown = [template.model_dump_json()]
        tasks = ["Run this for me", *(f"Run this for me ({what})" for what, _t, _v in SHAPES[::7])]
        for task in tasks:
            for style in STYLES:
                result = warm(
                    "scrubbed", task, style=style, budget=100_000, max_examples=100, record_use=False
                )
                for fmt in ("openai", "anthropic"):
                    shown.append(json.dumps(result.as_dict(fmt), ensure_ascii=False))
        assert len(template.examples) == len(SHAPES)  # every command was kept, scrubbed
        return "\n".join(shown)
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.mark.parametrize(("what", "text", "value"), SHAPES, ids=[what for what, _t, _v in SHAPES])
def test_no_planted_value_reaches_a_template_or_a_warm_up(
    built: str, what: str, text: str, value: str
) -> None:
    assert value not in built, f"{what}: {value!r} reached the template or a warm-up"
