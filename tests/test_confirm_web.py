"""The approvers' web page: CSRF and sign-in over HTTP, and a real chromium through Playwright."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kindling.confirm.store import ConfirmationStore
from test_confirm_support import Tokens, auth, daemon_settings, make_tokens, running


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Tokens, ConfirmationStore]]:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db))
    tokens = make_tokens(store)
    with running(store.settings, store) as server:
        yield server.base_url, tokens, store
    store.close()


def _submit(base: str, token: str, action: str, details: object) -> dict[str, object]:
    r = httpx.post(
        f"{base}/confirm",
        json={"action": action, "description": f"Please {action}", "details": details},
        headers=auth(token),
    )
    assert r.status_code == 202
    return dict(r.json())


def test_sign_in_rules_and_csrf(daemon: tuple[str, Tokens, ConfirmationStore]) -> None:
    base, tokens, store = daemon
    request = _submit(base, tokens.agent, "delete_data", {"table": "users"})
    with httpx.Client(base_url=base) as web:
        assert web.get("/ui").status_code == 303
        assert web.post("/ui/login", data={"token": tokens.agent}).status_code == 401
        assert web.post("/ui/login", data={"token": "kct_nope"}).status_code == 401
        login = web.post("/ui/login", data={"token": tokens.approver})
        assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
        page = web.get("/ui")
        assert page.status_code == 200 and request["id"] in page.text
        assert "Content-Security-Policy" in page.headers
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf
        form = {"decision": "approve", "digest": str(request["digest"]), "reason": ""}
        # No CSRF token, or a wrong one: refused, and nothing changes.
        assert web.post(f"/ui/decide/{request['id']}", data=form).status_code == 403
        assert web.post(f"/ui/decide/{request['id']}", data={**form, "csrf": "0" * 64}).status_code == 403
        assert store.get(str(request["id"])).status == "pending"
        # A stale digest (the request is not what the page showed) is refused too.
        stale = web.post(
            f"/ui/decide/{request['id']}", data={**form, "csrf": csrf.group(1), "digest": "f" * 64}
        )
        assert stale.status_code == 412
        done = web.post(f"/ui/decide/{request['id']}", data={**form, "csrf": csrf.group(1)})
        assert done.status_code == 303
        assert store.get(str(request["id"])).decided_by == "alice"
        history = web.get("/ui").text
        assert "approved" in history
        # Deny with a reason from the page.
        other = _submit(base, tokens.agent, "shutdown_service", {"host": "db-1"})
        page = web.get("/ui").text
        assert other["id"] in page and "db-1" in page
        denied = web.post(
            f"/ui/decide/{other['id']}",
            data={
                "decision": "deny",
                "digest": str(other["digest"]),
                "reason": "maintenance window is Sunday",
                "csrf": csrf.group(1),
            },
        )
        assert denied.status_code == 303
        record = store.get(str(other["id"]))
        assert record.status == "denied" and record.reason == "maintenance window is Sunday"
        assert "maintenance window is Sunday" in web.get("/ui").text
    # Without the cookie, the fragment and the decision are refused.
    assert httpx.get(f"{base}/ui/pending").status_code == 401
    assert httpx.post(f"{base}/ui/decide/{request['id']}", data=form).status_code == 401


@pytest.mark.browser
def test_browser_signs_in_sees_details_and_approves(daemon: tuple[str, Tokens, ConfirmationStore]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, tokens, store = daemon
    long_detail = "line of the migration plan\n" * 400
    first = _submit(base, tokens.agent, "migrate_database", {"plan": long_detail, "tables": ["a", "b"]})
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium"),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        try:
            page = browser.new_page()
            page.goto(f"{base}/ui/login#token={tokens.approver}")
            # The sign-in URL's fragment fills the token field and is then removed from the address.
            expect(page.locator("#token")).to_have_value(tokens.approver)
            page.click("#signin")
            card = page.locator(f"#req-{first['id']}")
            expect(card).to_be_visible()
            details = card.locator("pre.details").inner_text()
            assert details.count("line of the migration plan") == 400
            expect(card.locator("code.digest")).to_have_text(str(first["digest"]))
            # A request submitted while the page is open appears without a reload.
            second = _submit(base, tokens.agent2, "rotate_keys", {"key": "signing"})
            expect(page.locator(f"#req-{second['id']}")).to_be_visible(timeout=10_000)
            # A form post from the signed-in browser session but without the CSRF token is refused.
            forged = page.request.post(
                f"{base}/ui/decide/{second['id']}",
                form={"decision": "approve", "digest": str(second["digest"])},
            )
            assert forged.status == 403
            assert store.get(str(second["id"])).status == "pending"
            card = page.locator(f"#req-{first['id']}")
            card.locator("input[name=reason]").fill("plan reviewed")
            card.locator("button.approve").click()
            expect(page.locator("#notice")).to_contain_text("approved")
            expect(page.locator(f"#req-{first['id']}")).to_have_count(0)
        finally:
            browser.close()
    api = httpx.get(f"{base}/confirm/{first['id']}", headers=auth(tokens.agent)).json()
    assert api["status"] == "approved" and api["decided_by"] == "alice" and api["reason"] == "plan reviewed"
    assert store.get(str(second["id"])).status == "pending"
