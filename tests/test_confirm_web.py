"""The approvers' web page: CSRF and sign-in over HTTP, and a real chromium through Playwright."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kindling.confirm.store import ConfirmationStore
from test_confirm_support import Tokens, auth, card_form, daemon_settings, make_tokens, running, sign_in


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, Tokens, ConfirmationStore]]:
    db = str(tmp_path / "confirm.db")
    store = ConfirmationStore(db, daemon_settings(db))
    tokens = make_tokens(store)
    with running(store.settings, store) as server:
        yield server.base_url, tokens, store
    store.close()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One chromium for the module's browser tests (a launch costs seconds); each test gets its own page."""
    from playwright.sync_api import sync_playwright

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
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh browser context (no cookies or storage from another test) and a page in it."""
    context = chromium.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


def _submit(base: str, token: str, action: str, details: object) -> dict[str, object]:
    r = httpx.post(
        f"{base}/confirm",
        json={"action": action, "description": f"Please {action}", "details": details},
        headers=auth(token),
    )
    assert r.status_code == 202
    return dict(r.json())


def _open_link(page: Any, base: str, token: str) -> None:
    """Open the sign-in link the daemon prints (``/ui/login#token=...``) and wait for the signed-in page."""
    page.goto(f"{base}/ui/login#token={token}")
    page.wait_for_url(f"{base}/ui")


def test_sign_in_rules_and_csrf(daemon: tuple[str, Tokens, ConfirmationStore]) -> None:
    base, tokens, store = daemon
    request = _submit(base, tokens.agent, "delete_data", {"table": "users"})
    with httpx.Client(base_url=base) as web:
        assert web.get("/ui").status_code == 303
        assert sign_in(web, tokens.agent).status_code == 401
        assert sign_in(web, "kct_nope").status_code == 401
        # The sign-in form carries its own CSRF token: a post from elsewhere cannot sign a browser
        # in to someone else's account.
        assert web.post("/ui/login", data={"token": tokens.approver}).status_code == 403
        assert web.post("/ui/login", data={"token": tokens.approver, "csrf": "0" * 64}).status_code == 403
        login = sign_in(web, tokens.approver)
        assert login.status_code == 303 and "httponly" in login.headers["set-cookie"].lower()
        page = web.get("/ui")
        assert page.status_code == 200 and request["id"] in page.text
        assert "Content-Security-Policy" in page.headers
        fields = card_form(page.text, str(request["id"]))
        form = {
            "decision": "approve",
            "digest": str(request["digest"]),
            "reason": "",
            "shown": fields["shown"],
        }
        # No CSRF token, or a wrong one: refused, and nothing changes.
        assert web.post(f"/ui/decide/{request['id']}", data=form).status_code == 403
        assert web.post(f"/ui/decide/{request['id']}", data={**form, "csrf": "0" * 64}).status_code == 403
        assert store.get(str(request["id"])).status == "pending"
        csrf = fields["csrf"]
        # Posted the moment the card was rendered: refused, a card must be seen before it counts.
        # (Rendered again right here: the posts above take part of the minimum on a busy machine.)
        form["shown"] = card_form(web.get("/ui").text, str(request["id"]))["shown"]
        early = web.post(f"/ui/decide/{request['id']}", data={**form, "csrf": csrf})
        assert early.status_code == 409 and store.get(str(request["id"])).status == "pending"
        # A made-up render time is refused too.
        forged = {**form, "csrf": csrf, "shown": "1000." + "0" * 64}
        assert web.post(f"/ui/decide/{request['id']}", data=forged).status_code == 400
        time.sleep(store.settings.ui_min_view_seconds)
        # A stale digest (the request is not what the page showed) is refused too.
        stale = web.post(f"/ui/decide/{request['id']}", data={**form, "csrf": csrf, "digest": "f" * 64})
        assert stale.status_code == 400
        done = web.post(f"/ui/decide/{request['id']}", data={**form, "csrf": csrf})
        assert done.status_code == 303
        assert store.get(str(request["id"])).decided_by == "alice"
        history = web.get("/ui").text
        assert "approved" in history
        # Deny with a reason from the page.
        other = _submit(base, tokens.agent, "shutdown_service", {"host": "db-1"})
        page = web.get("/ui")
        assert other["id"] in page.text and "db-1" in page.text
        time.sleep(store.settings.ui_min_view_seconds)
        denied = web.post(
            f"/ui/decide/{other['id']}",
            data={
                **card_form(page.text, str(other["id"])),
                "decision": "deny",
                "reason": "maintenance window is Sunday",
            },
        )
        assert denied.status_code == 303
        record = store.get(str(other["id"]))
        assert record.status == "denied" and record.reason == "maintenance window is Sunday"
        assert "maintenance window is Sunday" in web.get("/ui").text
        # The page's poll carries ids only, and nothing at all when nothing changed.
        third = _submit(base, tokens.agent, "rotate_keys", {"key": "x" * 50_000})
        state = web.get("/ui/pending")
        assert state.status_code == 200 and state.json()["ids"] == [third["id"]] and len(state.content) < 200
        assert web.get("/ui/pending", params={"known": state.json()["version"]}).status_code == 204
        cards = web.get("/ui/cards", params={"ids": f"{third['id']},cr_unknown"})
        assert cards.text.count('class="request"') == 1 and third["id"] in cards.text
        # Signing out ends the sign-in on the server: the old cookie and its CSRF token stop working.
        page = web.get("/ui")
        old_cookie = web.cookies["kindling_confirm"]
        fields = card_form(page.text, str(third["id"]))
        assert web.post("/ui/logout", data={"csrf": fields["csrf"]}).status_code == 303
    with httpx.Client(base_url=base) as replay:
        replay.cookies.set("kindling_confirm", old_cookie, path="/ui")
        assert replay.get("/ui").status_code == 303
        assert replay.get("/ui/pending").status_code == 401
        time.sleep(store.settings.ui_min_view_seconds)
        again = replay.post(f"/ui/decide/{third['id']}", data={**fields, "decision": "approve"})
        assert again.status_code == 401 and store.get(str(third["id"])).status == "pending"
    # Without the cookie, the fragment and the decision are refused.
    assert httpx.get(f"{base}/ui/pending").status_code == 401
    assert httpx.post(f"{base}/ui/decide/{request['id']}", data=form).status_code == 401


@pytest.mark.browser
def test_browser_signs_in_sees_details_and_approves(
    daemon: tuple[str, Tokens, ConfirmationStore], page: Any
) -> None:
    from playwright.sync_api import expect

    base, tokens, store = daemon
    long_detail = "line of the migration plan\n" * 400
    first = _submit(base, tokens.agent, "migrate_database", {"plan": long_detail, "tables": ["a", "b"]})
    _open_link(page, base, tokens.approver)
    card = page.locator(f"#req-{first['id']}")
    expect(card).to_be_visible()
    details = card.locator("pre.details").inner_text()
    assert details.count("line of the migration plan") == 400
    expect(card.locator("code.digest")).to_have_text(str(first["digest"]))
    # A request submitted while the page is open is announced without a reload, and shown
    # when the approver asks.
    second = _submit(base, tokens.agent2, "rotate_keys", {"key": "signing"})
    expect(page.locator("#changes")).to_be_visible(timeout=10_000)
    page.click("#apply-changes")
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
    api = httpx.get(f"{base}/confirm/{first['id']}", headers=auth(tokens.agent)).json()
    assert api["status"] == "approved" and api["decided_by"] == "alice" and api["reason"] == "plan reviewed"
    assert store.get(str(second["id"])).status == "pending"


@pytest.mark.browser
def test_a_request_expiring_under_the_pointer_never_moves_another_under_it(
    daemon: tuple[str, Tokens, ConfirmationStore], page: Any
) -> None:
    """Issue 13 item 11: an agent times request A's expiry so B's Approve slides under the cursor."""
    from playwright.sync_api import expect

    base, tokens, store = daemon
    doomed = httpx.post(
        f"{base}/confirm",
        json={"action": "read_logs", "description": "Read the logs", "timeout_seconds": 3},
        headers=auth(tokens.agent),
    ).json()
    target = _submit(base, tokens.agent2, "wipe_database", {"cmd": "rm -rf /var/lib/postgresql/*"})
    _open_link(page, base, tokens.approver)
    first = page.locator(f"#req-{doomed['id']}")
    expect(first.locator("button.approve")).to_be_enabled()
    box = first.locator("button.approve").bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    # A expires while the pointer rests on its Approve button.
    expect(first).to_have_class(re.compile(r"\bgone\b"), timeout=10_000)
    assert store.get(str(doomed["id"])).status == "expired"
    # Nothing moved: A's greyed-out card is still where the pointer is, and a new request is
    # announced instead of being inserted.
    late = _submit(base, tokens.agent2, "rotate_keys", {"key": "signing"})
    expect(page.locator("#changes")).to_be_visible(timeout=10_000)
    expect(page.locator("#changes-text")).to_contain_text("1 new request")
    assert page.locator(f"#req-{late['id']}").count() == 0
    after = first.locator("button.approve").bounding_box()
    assert after is not None and (after["x"], after["y"]) == (box["x"], box["y"])
    page.mouse.click(x, y)
    page.wait_for_timeout(300)  # time for any navigation a click could have started
    assert store.get(str(target["id"])).status == "pending"
    assert store.get(str(doomed["id"])).status == "expired"
    # Applying the changes is the approver's own act; the card that then moves under the
    # pointer cannot be decided until it has stood still for the minimum time.
    page.click("#apply-changes")
    expect(page.locator(f"#req-{doomed['id']}")).to_have_count(0)
    expect(page.locator(f"#req-{late['id']}")).to_be_visible()
    page.mouse.click(x, y)
    page.wait_for_timeout(300)
    assert store.get(str(target["id"])).status == "pending"
    # Once it has been seen, the same click decides the request it lands on, as it should.
    card = page.locator(f"#req-{target['id']}")
    expect(card.locator("button.approve")).to_be_enabled()
    card.locator("button.approve").click()
    expect(page.locator("#notice")).to_contain_text("wipe_database approved")
    assert store.get(str(target["id"])).status == "approved"
    assert store.get(str(late["id"])).status == "pending"


@pytest.mark.browser
def test_misleading_characters_are_marked_on_the_page(
    daemon: tuple[str, Tokens, ConfirmationStore], page: Any
) -> None:
    from playwright.sync_api import expect

    base, tokens, _store = daemon
    sneaky = _submit(
        base, tokens.agent, "restore_backup", {"bucket": "acme-backups-st\u0430ging", "env\u200b": "prod"}
    )
    _open_link(page, base, tokens.approver)
    card = page.locator(f"#req-{sneaky['id']}")
    expect(card.locator(".warning")).to_contain_text("2 characters")
    expect(card.locator("mark.lookalike")).to_have_attribute("title", "U+0430 lookalike")
    expect(card.locator("mark.invisible")).to_have_text("[U+200B]")


@pytest.mark.browser
def test_the_sign_in_link_signs_in_and_never_switches_a_signed_in_browser(
    daemon: tuple[str, Tokens, ConfirmationStore], page: Any
) -> None:
    from playwright.sync_api import expect

    base, tokens, _store = daemon
    page.goto(f"{base}/ui/login#token={tokens.approver}")
    # Signed in with no click, and the token left the address bar.
    page.wait_for_url(f"{base}/ui")
    expect(page.locator("header")).to_contain_text("signed in as alice")
    assert "token" not in page.url
    # A link with another token does not switch a browser that is signed in: it fills the form
    # and says who is signed in; the approver chooses.
    page.goto(f"{base}/ui/login#token={tokens.approver2}")
    expect(page.locator("#signed-in")).to_contain_text("alice")
    expect(page.locator("#token")).to_have_value(tokens.approver2)
    assert page.url == f"{base}/ui/login"
    page.goto(f"{base}/ui")
    expect(page.locator("header")).to_contain_text("signed in as alice")
    # A link with a token the daemon does not know shows the refusal once (no loop of posts).
    fresh = page.context.browser.new_context()
    try:
        other = fresh.new_page()
        other.goto(f"{base}/ui/login#token=kct_unknown")
        expect(other.locator("#error")).to_contain_text("unknown or revoked")
        other.wait_for_timeout(300)
        assert other.url == f"{base}/ui/login" and other.locator("#error").count() == 1
    finally:
        fresh.close()


# Everything inside a card (elements and the text in them) must lie within the card's edges.
_OVERFLOW_JS = """
(card) => {
  const box = card.getBoundingClientRect();
  const out = [];
  const check = (rect, what) => {
    if (rect.width === 0 && rect.height === 0) return;
    if (rect.left < box.left - 1 || rect.right > box.right + 1) {
      out.push(`${what}: ${Math.round(rect.left)}-${Math.round(rect.right)} outside ${Math.round(box.left)}-${Math.round(box.right)}`);
    }
  };
  for (const el of card.querySelectorAll("*")) {
    check(el.getBoundingClientRect(), el.tagName + "." + el.className);
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).display !== "inline") {
      out.push(`${el.tagName}.${el.className} scrolls sideways (${el.scrollWidth} > ${el.clientWidth})`);
    }
  }
  const walker = document.createTreeWalker(card, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const rect of range.getClientRects()) check(rect, JSON.stringify(node.textContent.slice(0, 30)));
  }
  return out;
}
"""


@pytest.mark.browser
@pytest.mark.parametrize("width", [1100, 390])
def test_cards_keep_everything_inside_and_mark_high_risk(
    daemon: tuple[str, Tokens, ConfirmationStore], chromium: Any, width: int
) -> None:
    """At a desktop width and a phone's (390 px, where an approver lands from a notification)."""
    from playwright.sync_api import expect

    base, tokens, _store = daemon
    risky = _submit(
        base, tokens.agent, "wipe_database", {"cmd": "rm -rf /var/lib/postgresql/15/main/pg_wal/*"}
    )
    plain = httpx.post(
        f"{base}/confirm",
        json={
            "action": "read_logs_from_the_production_replica_in_the_eu_west_region",
            "description": "Read " + "/var/log/postgresql/" + "x" * 150 + ".log",
            "details": {"blob": "QUJD" * 80, "path": "/srv/" + "/".join(["deeply-nested-folder"] * 8)},
            "session_key": "telegram:1234567890:" + "thread" * 20,
            "requester_label": "ops-bot-" + "y" * 60,
        },
        headers=auth(tokens.agent2),
    ).json()
    context = chromium.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        _open_link(page, base, tokens.approver)
        for request in (risky, plain):
            card = page.locator(f"#req-{request['id']}")
            expect(card.locator("button.approve")).to_be_enabled()
            assert card.evaluate(_OVERFLOW_JS) == [], (width, request["action"])
            # No blank band above the card's title.
            top = card.bounding_box()
            title = card.locator("h3").bounding_box()
            assert top is not None and title is not None and title["y"] - top["y"] < 24, (top, title)
        # The daemon's own high-risk actions are marked; others are not.
        marked = page.locator(f"#req-{risky['id']}")
        expect(marked).to_have_attribute("data-risk", "high")
        expect(marked.locator(".risk-badge")).to_have_text(re.compile("high risk", re.IGNORECASE))
        expect(marked.locator(".risk-note")).to_be_visible()
        assert page.locator(f"#req-{plain['id']} .risk-badge").count() == 0
        # A request the asking agent marked high-risk (an approval hook's flagged command) is marked too.
        hooked = _submit(
            base, tokens.agent, "hermes.terminal", {"command": "rm -rf /srv/data", "risk": "high"}
        )
        page.reload()
        expect(page.locator(f"#req-{hooked['id']}")).to_have_attribute("data-risk", "high")
        # And the page as a whole never scrolls sideways.
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        context.close()
