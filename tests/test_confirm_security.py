"""Second-look security tests of the confirmation daemon: who may decide, what a browser holds,
what a retried submit returns, and how far one client can push the server."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from kindling.confirm import policy
from kindling.confirm.client import ConfirmClient
from kindling.confirm.policy import Identity
from kindling.confirm.store import ConfirmationStore
from kindling.errors import ConfirmError, InvalidNameError
from test_confirm_support import Tokens, auth, card_form, daemon_settings, make_tokens, running, sign_in


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConfirmationStore]:
    db = str(tmp_path / "confirm.db")
    s = ConfirmationStore(db, daemon_settings(db, token_rate_limit=12, max_waits_per_token=2, max_waits=3))
    yield s
    s.close()


@pytest.fixture
def tokens(store: ConfirmationStore) -> Tokens:
    return make_tokens(store)


@pytest.fixture
def client(store: ConfirmationStore, tokens: Tokens) -> Iterator[httpx.Client]:
    with running(store.settings, store) as server, httpx.Client(base_url=server.base_url, timeout=30) as c:
        yield c


def _submit(
    client: httpx.Client, token: str, action: str = "restart_worker", **extra: object
) -> httpx.Response:
    body = {"action": action, "description": f"Run {action}", **extra}
    return client.post("/confirm", json=body, headers=auth(token))


def test_the_requesters_own_token_can_never_decide_whatever_its_role(
    store: ConfirmationStore, tokens: Tokens
) -> None:
    agent = store.authenticate(tokens.agent)
    assert agent is not None
    rid = store.submit(action="a", description="d", identity=agent).request.id  # type: ignore[union-attr]
    # Defence in depth below the role check: the same token id with deciding powers is still refused.
    same_token = Identity(agent.token_id, "someone-else", "approver")
    with pytest.raises(ConfirmError) as err:
        store.decide(rid, "approved", identity=same_token)
    assert err.value.status_code == 403 and store.get(rid).status == "pending"


def test_a_requester_label_cannot_pose_as_an_approver(client: httpx.Client, tokens: Tokens) -> None:
    rid = _submit(client, tokens.agent, requester="alice").json()["id"]
    seen = client.get(f"/confirm/{rid}", headers=auth(tokens.approver)).json()
    assert seen["requester"] == "bot" and seen["requester_label"] == "alice"
    with _signed_in(client, tokens.approver) as web:
        page = web.get("/ui").text
    assert "bot" in page and "calls itself" in page


@pytest.mark.parametrize(
    "spelling", ["DEPLOY_PRODUCTION", "Deploy-Production", "deploy.production", " deploy production "]
)
def test_high_risk_cannot_slip_past_a_catch_all_rule_by_spelling(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore, spelling: str
) -> None:
    assert client.post("/whitelist", json={"action": "*"}, headers=auth(tokens.admin)).status_code == 201
    r = _submit(client, tokens.agent, spelling)
    assert r.status_code == 202 and r.json()["status"] == "pending"
    with pytest.raises(InvalidNameError):
        store.add_rule(spelling)


def test_an_idempotency_key_reused_for_another_request_is_refused(
    client: httpx.Client, tokens: Tokens
) -> None:
    h = {**auth(tokens.agent), "Idempotency-Key": "k-9"}
    first = client.post("/confirm", json={"action": "restart_worker", "description": "d"}, headers=h)
    assert first.status_code == 202
    client.post(f"/confirm/{first.json()['id']}/approve", headers=auth(tokens.approver))
    # Same key, different action: handing back the approved request would approve the wrong thing.
    other = client.post("/confirm", json={"action": "drop_cache", "description": "d"}, headers=h)
    assert other.status_code == 422 and "Idempotency-Key" in other.json()["error"]
    again = client.post("/confirm", json={"action": "restart_worker", "description": "d"}, headers=h)
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]


def test_one_token_cannot_flood_the_queue_with_made_up_actions(client: httpx.Client, tokens: Tokens) -> None:
    codes = [_submit(client, tokens.agent, f"action_{i}").status_code for i in range(13)]
    assert codes[:12] == [202] * 12 and codes[12] == 429
    r = _submit(client, tokens.agent, "action_x")
    assert "'bot'" in r.json()["error"] and int(r.headers["Retry-After"]) > 0
    # Another agent is not held back by the first one's limit.
    assert _submit(client, tokens.agent2, "action_0").status_code == 202


def test_long_polls_are_capped_per_token_and_the_client_backs_off(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore
) -> None:
    rid = _submit(client, tokens.agent).json()["id"]
    url = f"/confirm/{rid}"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        held = [
            pool.submit(client.get, url, params={"wait": 3}, headers=auth(tokens.agent)) for _ in range(2)
        ]
        time.sleep(0.5)
        refused = client.get(url, params={"wait": 3}, headers=auth(tokens.agent))
        assert refused.status_code == 429 and "long polls" in refused.json()["error"]
        # A plain read needs no slot; another token still has one (the daemon holds 3 in all).
        assert client.get(url, headers=auth(tokens.agent)).status_code == 200
        third = pool.submit(client.get, url, params={"wait": 3}, headers=auth(tokens.approver))
        time.sleep(0.3)
        assert client.get(url, params={"wait": 1}, headers=auth(tokens.approver2)).status_code == 429
        # The client waits through 429s instead of failing, and sees the decision.
        with ConfirmClient(str(client.base_url), tokens.agent) as agent:
            waiting = pool.submit(agent.wait, rid, 10)
            time.sleep(0.3)
            client.post(f"{url}/deny", json={"reason": "no"}, headers=auth(tokens.approver))
            assert waiting.result(timeout=15)["status"] == "denied"
        assert all(f.result().status_code == 200 for f in [*held, third])
    # Every slot was given back: the agent may hold two long polls again.
    again = [client.get(url, params={"wait": 0.1}, headers=auth(tokens.agent)) for _ in range(3)]
    assert [r.status_code for r in again] == [200, 200, 200]


@contextmanager
def _signed_in(client: httpx.Client, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=str(client.base_url), timeout=30) as web:
        assert sign_in(web, token).status_code == 303
        yield web


def test_the_sign_in_cookie_is_not_the_token_and_dies_with_it(
    client: httpx.Client, tokens: Tokens, store: ConfirmationStore
) -> None:
    with httpx.Client(base_url=str(client.base_url), timeout=30) as web:
        login = sign_in(web, tokens.approver)
        cookie = login.cookies["kindling_confirm"]
        header = login.headers["set-cookie"].lower()
        assert "httponly" in header and "samesite=strict" in header and "max-age=43200" in header
        assert tokens.approver not in cookie and tokens.approver not in header
        # A stolen cookie is not an API token.
        assert client.get("/confirm", headers=auth(cookie)).status_code == 401
        assert web.get("/ui").status_code == 200
        # A forged or stretched cookie is refused.
        token_id, expires, nonce, mac = cookie.split(".")
        for forged in (
            f"{token_id}.{int(expires) + 9999}.{nonce}.{mac}",
            f"{token_id}.{expires}.{nonce}.{'0' * 64}",
            f"tok_other.{expires}.{nonce}.{mac}",
            "x",
        ):
            web.cookies.set("kindling_confirm", forged)
            assert web.get("/ui").status_code == 303, forged
        # An expired one too.
        old = policy.session_cookie(store.secret(), token_id, int(time.time()) - 1)
        web.cookies.set("kindling_confirm", old)
        assert web.get("/ui").status_code == 303
        # Revoking the token signs the browser out at once.
        web.cookies.set("kindling_confirm", cookie)
        assert web.get("/ui").status_code == 200
        store.revoke_token("alice")
        assert web.get("/ui").status_code == 303
        assert web.get("/ui/pending").status_code == 401


def test_the_csrf_token_belongs_to_one_sign_in(client: httpx.Client, tokens: Tokens) -> None:
    rid = _submit(client, tokens.agent).json()
    with _signed_in(client, tokens.approver) as first, _signed_in(client, tokens.approver) as second:
        fields = card_form(first.get("/ui").text, rid["id"])
        # Another sign-in of the same person has its own cookie, and the first one's CSRF token is
        # no good there.
        assert second.cookies["kindling_confirm"] != first.cookies["kindling_confirm"]
        form = {"decision": "approve", **fields}
        time.sleep(0.2)  # the page's minimum viewing time in these tests
        assert second.post(f"/ui/decide/{rid['id']}", data=form).status_code == 403
        done = first.post(f"/ui/decide/{rid['id']}", data=form)
        assert done.status_code == 303 and "msg=" not in done.headers["location"]
        page = first.get(done.headers["location"]).text
        assert "restart_worker approved by alice" in page


def test_the_notice_is_never_echoed_from_the_url(client: httpx.Client, tokens: Tokens) -> None:
    with _signed_in(client, tokens.approver) as web:
        page = web.get("/ui", params={"decided": "Your session expired, sign in at evil.example", "msg": "x"})
        assert "evil.example" not in page.text and 'id="notice"' not in page.text


def test_every_body_is_capped_even_before_sign_in(client: httpx.Client, tokens: Tokens) -> None:
    big = "t" * 1_200_000
    r = client.post("/ui/login", data={"token": big})
    assert r.status_code == 413 and "larger than" in r.json()["error"]
    chunks = (b"token=" + b"x" * 100_000 for _ in range(15))  # streamed, no Content-Length
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    r = client.post("/ui/login", content=chunks, headers=form)
    assert r.status_code == 413 and "larger than" in r.json()["error"]
    streamed_json = (b'{"action": "x", "description": "' + b"y" * 100_000 for _ in range(15))
    r = client.post("/confirm", content=streamed_json, headers=auth(tokens.agent))
    assert r.status_code == 413 and "larger than" in r.json()["error"]
    assert client.get("/health").status_code == 200


def test_sqlite_commits_are_synced_to_disk(store: ConfirmationStore) -> None:
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


@pytest.mark.parametrize("action", ["deploy\u202e_staging", "read\u200blogs", "x\x7f", "a\u2028b"])
def test_actions_with_invisible_or_control_characters_are_refused(
    client: httpx.Client, tokens: Tokens, action: str
) -> None:
    r = _submit(client, tokens.agent, action)
    assert r.status_code == 400 and "printable" in r.json()["error"]


def test_the_cookie_is_secure_when_the_public_url_is_https(tmp_path: Path) -> None:
    db = str(tmp_path / "tls.db")
    store = ConfirmationStore(db, daemon_settings(db, public_url="https://confirm.example"))
    approver = store.create_token("approver", "alice")[1]
    try:
        with running(store.settings, store) as server:
            with httpx.Client(base_url=server.base_url) as web:
                login = sign_in(web, approver)
            assert login.status_code == 303 and "secure" in login.headers["set-cookie"].lower()
    finally:
        store.close()


def test_a_local_decision_or_expiry_wakes_a_long_poll_at_once(tmp_path: Path) -> None:
    db = str(tmp_path / "wake.db")
    # A database re-read only every 30 s: a prompt answer can only come from the wake-up.
    store = ConfirmationStore(db, daemon_settings(db, poll_interval=30.0))
    tokens = make_tokens(store)
    try:
        with (
            running(store.settings, store) as server,
            httpx.Client(base_url=server.base_url, timeout=60) as c,
        ):
            rid = _submit(c, tokens.agent).json()["id"]
            short = _submit(c, tokens.agent, "other", timeout_seconds=1).json()["id"]
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                started = time.monotonic()
                decided = pool.submit(
                    c.get, f"/confirm/{rid}", params={"wait": 20}, headers=auth(tokens.agent)
                )
                expired = pool.submit(
                    c.get, f"/confirm/{short}", params={"wait": 20}, headers=auth(tokens.agent)
                )
                time.sleep(0.3)
                c.post(f"/confirm/{rid}/approve", headers=auth(tokens.approver))
                assert decided.result(timeout=10).json()["status"] == "approved"
                assert time.monotonic() - started < 5
                assert expired.result(timeout=10).json()["status"] == "expired"
                assert time.monotonic() - started < 5
    finally:
        store.close()


def test_the_sqlite_file_holding_the_cookie_secret_is_private(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"
    s = ConfirmationStore(str(fresh))
    try:
        s.create_token("agent", "a")
        for path in (fresh, tmp_path / "fresh.db-wal"):
            assert path.stat().st_mode & 0o777 == 0o600, path
    finally:
        s.close()
    # An existing database left readable by others is tightened on open.
    fresh.chmod(0o644)
    ConfirmationStore(f"sqlite:///{fresh}").close()
    assert fresh.stat().st_mode & 0o777 == 0o600
