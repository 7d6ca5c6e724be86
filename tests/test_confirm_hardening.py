"""Regression tests for what an attack on a running daemon found (issue 13, items 12, 13, 19, 20)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kindling.cli.main import app as cli_app
from kindling.confirm import policy
from kindling.confirm.folding import fold_action
from kindling.confirm.policy import is_high_risk
from kindling.confirm.settings import HIGH_RISK_ACTIONS
from kindling.confirm.spoofing import text_warnings
from kindling.confirm.store import ConfirmationStore
from kindling.errors import StoreError
from test_confirm_support import Tokens, auth, card_form, daemon_settings, make_tokens, running, sign_in


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "confirm.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(target: str) -> Iterator[ConfirmationStore]:
    s = ConfirmationStore(target, daemon_settings(target))
    yield s
    s.close()


@pytest.fixture
def tokens(store: ConfirmationStore) -> Tokens:
    return make_tokens(store)


@pytest.fixture
def client(store: ConfirmationStore, tokens: Tokens) -> Iterator[httpx.Client]:
    with running(store.settings, store) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        yield c


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def _submit(client: httpx.Client, token: str, **body: object) -> httpx.Response:
    payload = {"action": "restart_worker", "description": "Restart the worker", **body}
    return client.post("/confirm", json=payload, headers=auth(token))


def test_deep_details_are_refused_at_submit_and_reads_never_fail(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore
) -> None:
    # 256 levels in a 562-byte body used to be stored, then broke every read of it with a 500.
    for depth in (256, 40, 2000):
        raw = '{"action":"a","description":"d","details":' + '{"a":' * depth + "1" + "}" * depth + "}"
        deep = client.post("/confirm", content=raw, headers=auth(tokens.agent))
        assert deep.status_code == 400 and "deeper" in deep.json()["error"], depth
    assert store.counts()["pending"] == 0
    # As deep as is allowed: stored, read, listed, shown on the page and decided, all without a 500.
    ok = _submit(client, tokens.agent, details=_nested(30))
    assert ok.status_code == 202
    rid = ok.json()["id"]
    assert client.get(f"/confirm/{rid}", headers=auth(tokens.approver)).status_code == 200
    assert client.get("/confirm", headers=auth(tokens.approver)).status_code == 200
    decided = client.post(f"/confirm/{rid}/approve", json={}, headers=auth(tokens.approver))
    assert decided.status_code == 200 and decided.json()["status"] == "approved"


@pytest.mark.parametrize("depth", [300, 1020])
def test_a_decision_on_a_deep_row_from_before_the_limit_is_not_a_500(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore, depth: int
) -> None:
    rid = _submit(client, tokens.agent).json()["id"]
    # A row stored by an older daemon, before submit bounded the depth (orjson read up to 1024).
    with store.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE confirm_requests SET details = :d WHERE id = :i"),
            {"d": '{"a":' * depth + '"leaf"' + "}" * depth, "i": rid},
        )
    got = client.get(f"/confirm/{rid}", headers=auth(tokens.approver))
    assert got.status_code == 200 and "deny this request" in got.json()["details"]["not_shown"]
    assert client.get("/confirm", headers=auth(tokens.approver)).status_code == 200
    with httpx.Client(base_url=str(client.base_url)) as web:
        assert sign_in(web, tokens.approver).status_code == 303
        page = web.get("/ui")
        assert page.status_code == 200 and rid in page.text
    decided = client.post(f"/confirm/{rid}/deny", json={"reason": "r"}, headers=auth(tokens.approver))
    assert decided.status_code == 200 and store.get(rid).status == "denied"


def test_types_are_strict_and_nul_is_a_400_without_database_details(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore, target: str
) -> None:
    for bad in ("30", True, 30.0):
        r = _submit(client, tokens.agent, timeout_seconds=bad)
        assert r.status_code == 400 and "timeout_seconds" in r.json()["error"], bad
    assert _submit(client, tokens.agent, timeout_seconds=30).status_code == 202
    for body in (
        {"description": "bad\x00text"},
        {"details": {"k\x00": 1}},
        {"session_key": "s\x00"},
    ):
        r = _submit(client, tokens.agent, **body)
        assert r.status_code == 400 and "NUL" in r.json()["error"], body
    # A NUL that reaches the database another way (a path) is still the client's 400, and no answer
    # names the database's user, host or port.
    for method, path, token in (
        ("DELETE", "/tokens/bad%00name", tokens.admin),
        ("GET", "/confirm/cr_%00", tokens.approver),
        ("POST", "/confirm/cr_%00/approve", tokens.approver),
    ):
        r = client.request(method, path, headers=auth(token))
        assert r.status_code in (400, 404), (path, r.text)
        assert "127.0.0.1" not in r.text and "postgres" not in r.text and str(target) not in r.text


def test_integers_past_64_bits_stay_exact_and_the_digest_covers_them(
    client: httpx.Client, tokens: Tokens
) -> None:
    big = 2**70 + 1
    details = {"amount": big, "ratio": 0.5, "ids": [18446744073709551617]}
    r = _submit(client, tokens.agent, details=details)
    assert r.status_code == 202
    assert '"amount":1180591620717411303425' in r.text.replace(" ", "")
    got = client.get(f"/confirm/{r.json()['id']}", headers=auth(tokens.approver))
    assert json.loads(got.text)["details"] == details
    assert got.json()["digest"] == policy.request_digest("restart_worker", "Restart the worker", details)
    rounded = {**details, "amount": float(big)}
    assert got.json()["digest"] != policy.request_digest("restart_worker", "Restart the worker", rounded)


def test_lookalike_and_invisible_characters_are_flagged_in_the_api(
    client: httpx.Client, tokens: Tokens
) -> None:
    r = _submit(
        client,
        tokens.agent,
        description="Restore acme-backups-st\u0430ging",
        details={"env": "prod", "env\u200b": "x", "cmd": "echo \u202eevil"},
    )
    assert r.status_code == 202
    warnings = r.json()["warnings"]
    kinds = {(w["field"], w["kind"], w["char"]) for w in warnings}
    assert ("description", "lookalike", "U+0430") in kinds
    assert ("details (key)", "invisible", "U+200B") in kinds
    assert ("details.cmd", "bidi", "U+202E") in kinds
    plain = _submit(client, tokens.agent, description="Plain ASCII and Привет, мир", details={"a": 1})
    assert plain.json()["warnings"] == []


def test_compatibility_lookalikes_and_the_action_are_flagged_too(
    client: httpx.Client, tokens: Tokens
) -> None:
    # Full-width letters, ligatures and a one-dot leader read as ASCII; NFKC folds them to it.
    r = _submit(
        client,
        tokens.agent,
        action="d\u0435ploy_\uff53taging",
        description="Restore acme-backups-\uff53taging from \ufb01le backup\u2024tar",
        details={"bucket": "acme\U0001d41a"},
    )
    assert r.status_code == 202
    got = client.get(f"/confirm/{r.json()['id']}", headers=auth(tokens.approver)).json()
    kinds = {(w["field"], w["char"]) for w in got["warnings"] if w["kind"] == "lookalike"}
    assert {("action", "U+0435"), ("action", "U+FF53")} <= kinds
    assert {("description", "U+FF53"), ("description", "U+FB01"), ("description", "U+2024")} <= kinds
    assert ("details.bucket", "U+1D41A") in kinds
    plain = _submit(client, tokens.agent, description="caf\u00e9, na\u00efve, \u2122 and \u00bd", details={})
    assert plain.json()["warnings"] == []


def test_lookalike_action_names_fold_to_the_high_risk_name() -> None:
    for spelling in (
        "\uff44\uff45\uff4c\uff45\uff54\uff45_data",  # full-width
        "d\u0435lete_data",  # Cyrillic e
        "DELETE.DATA",
        "\u0440ublish_\u0440ackage",  # Cyrillic er
        "publish_pa\u0441kage",
        "tr\u0430nsfer-funds",
    ):
        assert is_high_risk(spelling, HIGH_RISK_ACTIONS), spelling
    assert fold_action("\ufb01nal_\u0455tep") == "final_step"  # ligature and Cyrillic dze
    assert not is_high_risk("read_logs", HIGH_RISK_ACTIONS)
    assert text_warnings("ok", None) == []


def test_a_lookalike_high_risk_action_is_never_auto_approved(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore
) -> None:
    store.add_rule("*")
    r = _submit(client, tokens.agent, action="\uff52otate_keys")
    assert r.status_code == 202 and r.json()["status"] == "pending"


def test_crafted_cookie_expiries_are_refused_without_a_500(client: httpx.Client) -> None:
    for expiry in ("\u00b2", "9" * 5000, "\u0663\u0663"):
        cookie = f"kindling_confirm=tok_1.{expiry}.abcd.{'0' * 64}".encode()
        for path in ("/ui", "/ui/pending"):
            r = client.get(path, headers=[(b"cookie", cookie)], follow_redirects=False)
            assert r.status_code in (303, 401), (expiry[:5], path, r.status_code)
    assert policy.read_session_cookie("s", "a.\u00b2.b.c", 0) is None


def test_non_ascii_secrets_in_cookies_and_forms_are_refused_without_a_500(
    client: httpx.Client, tokens: Tokens
) -> None:
    # hmac.compare_digest raises on a str with non-ASCII characters: each place a client's value
    # is compared with a secret must refuse it like any other wrong value.
    for cookie in ("tok_1.9999999999.abcd.\u00e9", "\u00e9.9999999999.abcd.00"):
        for path in ("/ui", "/ui/pending"):
            r = client.get(path, headers=[(b"cookie", f"kindling_confirm={cookie}".encode())])
            assert r.status_code in (303, 401), (cookie, path, r.status_code)
    rid = _submit(client, tokens.agent).json()["id"]
    with httpx.Client(base_url=str(client.base_url), timeout=30) as web:
        web.get("/ui/login")  # the sign-in form's nonce cookie
        assert web.post("/ui/login", data={"token": tokens.approver, "csrf": "\u00e9"}).status_code == 403
        assert sign_in(web, tokens.approver).status_code == 303
        assert web.get("/ui/pending", params={"known": "\u00e9"}).status_code == 200
        form = card_form(web.get("/ui").text, rid)
        for field in ("csrf", "shown"):
            bad = {**form, "decision": "deny", field: "1.\u00e9"}
            assert web.post(f"/ui/decide/{rid}", data=bad).status_code in (400, 403), field
        assert web.post("/ui/logout", data={"csrf": "\u00e9"}).status_code == 403
    assert client.get(f"/confirm/{rid}", headers=auth(tokens.approver)).json()["status"] == "pending"


def test_api_docs_are_off_and_4xx_are_documented(client: httpx.Client) -> None:
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert client.get(path).status_code == 404
    schema = client.get("/openapi.json").json()
    submit = schema["paths"]["/confirm"]["post"]["responses"]
    assert {"400", "401", "403", "413", "429"} <= set(submit)
    approve = schema["paths"]["/confirm/{request_id}/approve"]["post"]["responses"]
    assert {"400", "401", "403", "404", "409", "412"} <= set(approve)
    assert {"401", "403"} <= set(schema["paths"]["/tokens"]["post"]["responses"])


def test_audit_truncate_is_refused_on_postgresql(pg_url: str) -> None:
    # (SQLite has no TRUNCATE; its DELETE without WHERE meets the row trigger.)
    store = ConfirmationStore(pg_url, daemon_settings(pg_url))
    make_tokens(store)
    with pytest.raises(StoreError, match="append-only"), store._write() as conn:
        conn.exec_driver_sql("TRUNCATE confirm_audit")
    assert store.verify_audit().rows == 5
    store.close()


def test_verify_checks_requests_against_the_audit_log_and_the_head(
    store: ConfirmationStore, tokens: Tokens, target: str
) -> None:
    agent = store.authenticate(tokens.agent)
    approver = store.authenticate(tokens.approver)
    assert agent and approver
    ids = [store.submit(action=f"a{i}", description="d", identity=agent).request.id for i in range(3)]  # type: ignore[union-attr]
    store.decide(ids[0], "approved", identity=approver, reason="fine")
    report = store.verify_audit()
    assert report.ok and report.requests == 3 and report.head.startswith(f"{report.rows}:")
    head = report.head
    assert store.verify_audit(expect_head=head).ok
    # More events later: the old head is still inside the chain.
    store.decide(ids[1], "denied", identity=approver)
    assert store.verify_audit(expect_head=head).ok
    runner = CliRunner()
    out = runner.invoke(cli_app, ["confirm", "audit", "verify", "--db", target, "--expect-head", head])
    assert out.exit_code == 0 and "Head: " in out.stdout

    # Someone with write access to the table flips a decision: the chain holds, the request does not.
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE confirm_requests SET status = 'denied' WHERE id = :i"), {"i": ids[0]})
    bad = store.verify_audit()
    assert not bad.ok and bad.bad_request == ids[0] and "denied" in (bad.problem or "")
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE confirm_requests SET status = 'approved' WHERE id = :i"), {"i": ids[0]})
        conn.execute(sa.text("UPDATE confirm_requests SET description = 'x' WHERE id = :i"), {"i": ids[2]})
    bad = store.verify_audit()
    assert not bad.ok and bad.bad_request == ids[2] and "digest" in (bad.problem or "")
    with store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE confirm_requests SET description = 'd' WHERE id = :i"), {"i": ids[2]})
    assert store.verify_audit().ok

    # Rows cut from the end, guard dropped: the chain alone still holds; the kept head does not.
    latest = store.verify_audit().head
    with store.engine.begin() as conn:
        if store.engine.dialect.name == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER confirm_audit_no_delete")
        else:
            conn.exec_driver_sql("ALTER TABLE confirm_audit DISABLE TRIGGER confirm_audit_append_only")
        conn.exec_driver_sql("DELETE FROM confirm_audit WHERE seq = (SELECT max(seq) FROM confirm_audit)")
    cut = store.verify_audit(expect_head=latest)
    assert not cut.ok and "cut" in (cut.problem or "")
    out = runner.invoke(cli_app, ["confirm", "audit", "verify", "--db", target, "--expect-head", latest])
    assert out.exit_code == 1 and "cut" in out.stderr
    out = runner.invoke(cli_app, ["confirm", "audit", "verify", "--db", target, "--expect-head", "nope"])
    assert out.exit_code != 0 and "audit head" in out.stderr


def test_an_admin_cannot_decide_requests_of_agents_it_minted(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore
) -> None:
    minted = client.post("/tokens", json={"role": "agent", "name": "my-bot"}, headers=auth(tokens.admin))
    assert minted.status_code == 201
    # A second admin minted by the first, then an agent minted by that one: still the first's.
    sub_admin = client.post("/tokens", json={"role": "admin", "name": "deputy"}, headers=auth(tokens.admin))
    grandchild = client.post(
        "/tokens", json={"role": "agent", "name": "deputy-bot"}, headers=auth(sub_admin.json()["token"])
    )
    for agent_token in (minted.json()["token"], grandchild.json()["token"]):
        rid = _submit(client, agent_token, action="drop_table").json()["id"]
        own = client.post(f"/confirm/{rid}/approve", json={}, headers=auth(tokens.admin))
        assert own.status_code == 403 and "minted" in own.json()["error"]
        assert store.get(rid).status == "pending"
        # Anyone else with the right may decide it.
        assert client.post(f"/confirm/{rid}/deny", json={}, headers=auth(tokens.approver)).status_code == 200
    # Agents from the CLI (or another admin) are the admin's to decide, as before.
    rid = _submit(client, tokens.agent).json()["id"]
    assert client.post(f"/confirm/{rid}/approve", json={}, headers=auth(tokens.admin)).status_code == 200
    assert store.verify_audit().ok
