"""Delivery URLs carry secrets: what kindling logs and saves about them must not."""

from __future__ import annotations

import pytest

from kindling.cron.delivery import check_delivery_url, redact
from kindling.errors import ConfigError


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        # Telegram's bot token is the URL's host part.
        ("tgram://123456789:AAHsecretBotToken/987654321", ["AAHsecretBotToken", "123456789:"]),
        # Pushover: user key @ application token.
        (
            "pover://uQiRzpo4DXghDmr9QzzfQu27cmVRsG@azGDORePK8gMaC0QOYAMyEEuzJnyUi",
            ["uQiRzpo4DX", "azGDORePK8"],
        ),
        ("json://user:hunter2@127.0.0.1:8080/hook", ["hunter2"]),
        ("discord://4174216298/JHMHI8qBe7bk2ZwO5U711o3dV_js", ["JHMHI8qBe7bk2ZwO5U711o3dV_js"]),
    ],
)
def test_redact_hides_each_services_tokens(url: str, secrets: list[str]) -> None:
    shown = redact(url)
    assert shown.split("://", 1)[0] == url.split("://", 1)[0]
    for secret in secrets:
        assert secret not in shown


def test_redact_of_an_unparseable_url_keeps_only_the_scheme() -> None:
    assert redact("nosuchservice://secret-token/abc") == "nosuchservice://..."
    assert redact("not a url at all") == "..."
    assert redact("local") == "local"


def test_a_rejected_delivery_url_is_named_without_its_secret() -> None:
    with pytest.raises(ConfigError) as info:
        check_delivery_url("nosuchservice://secret-token/abc")
    assert "secret-token" not in str(info.value)
    assert "nosuchservice://" in str(info.value)


def test_jobs_and_delivery_do_not_import_each_other() -> None:
    import ast
    from pathlib import Path

    import kindling.cron.jobs as jobs_module

    tree = ast.parse(Path(jobs_module.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "kindling.cron.delivery" not in imported  # delivery imports jobs: the leaf serves both
