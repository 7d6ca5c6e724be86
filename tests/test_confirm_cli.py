"""``kindling confirm`` through Typer's CliRunner: tokens, whitelist, audit, path, status, serve --help."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.confirm.store import ConfirmationStore
from test_confirm_support import DaemonProcess

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["confirm", *args])
    return result.exit_code, result.stdout, result.stderr


def test_path_follows_home_and_db(isolated_homes: Path) -> None:
    code, out, _ = invoke("path")
    assert code == 0 and out.strip() == str(isolated_homes / "kindling" / "confirm.db")
    code, out, _ = invoke("path", "--db", "postgresql://u:secret@127.0.0.1/x")
    assert code == 0 and "secret" not in out and "postgresql" in out


def test_token_and_rule_lists_never_cut_a_value_at_80_columns(isolated_homes: Path) -> None:
    name = "release-approver-for-the-payments-team"
    assert invoke("token", "create", "--role", "approver", "--name", name)[0] == 0
    assert invoke("whitelist", "add", "read_*", "--session", "telegram:1234567890:thread-abcdef-0042")[0] == 0
    [token] = json.loads(invoke("token", "list", "--json")[1])
    for columns in ("80", "200"):
        for args, values in (
            (["token", "list"], (name, token["id"], "approver")),
            (["whitelist", "list"], ("read_*", "telegram:1234567890:thread-abcdef-0042")),
        ):
            result = runner.invoke(app, ["confirm", *args], env={"COLUMNS": columns})
            assert result.exit_code == 0, result.output
            lines = result.stdout.splitlines()
            assert "…" not in result.stdout and max(len(line) for line in lines) <= int(columns)
            for value in values:
                assert any(value in line for line in lines), (args, columns, value, result.stdout)


def test_tokens_whitelist_audit_and_status(isolated_homes: Path) -> None:
    code, out, err = invoke("token", "create", "--role", "approver", "--name", "alice")
    assert code == 0 and out.strip().startswith("kct_") and "only this once" in err
    raw = out.strip()
    store = ConfirmationStore(isolated_homes / "kindling" / "confirm.db")
    assert store.authenticate(raw) is not None
    code, out, _ = invoke("token", "create", "--role", "agent", "--name", "bot", "--json")
    assert code == 0 and json.loads(out)["role"] == "agent"
    code, _, err = invoke("token", "create", "--role", "agent", "--name", "bot")
    assert code == 1 and "already exists" in err
    code, _, err = invoke("token", "create", "--role", "wizard", "--name", "x")
    assert code == 2 and "Role" in err
    code, out, _ = invoke("token", "list", "--json")
    assert {t["name"] for t in json.loads(out)} == {"alice", "bot"} and "kct_" not in out
    assert invoke("token", "revoke", "alice")[0] == 0
    assert store.authenticate(raw) is None
    assert invoke("token", "revoke", "alice")[0] == 1

    code, out, _ = invoke("whitelist", "add", "read_*", "--session", "s1")
    assert code == 0 and "Rule 1" in out
    code, _, err = invoke("whitelist", "add", "rotate_keys")
    assert code == 2 and "high-risk" in err
    code, out, _ = invoke("whitelist", "list", "--json")
    assert json.loads(out)[0]["session_key"] == "s1"
    assert invoke("whitelist", "remove", "1")[0] == 0
    assert invoke("whitelist", "remove", "1")[0] == 1

    code, out, _ = invoke("audit", "list", "--json", "--limit", "3")
    events = json.loads(out)
    assert code == 0 and len(events) == 3 and events[0]["event"] == "whitelist_removed"
    code, out, _ = invoke("audit", "verify")
    assert code == 0 and "intact" in out
    code, out, _ = invoke("status", "--json")
    status = json.loads(out)
    assert status["tokens"] == 1 and status["audit_events"] == 5 and status["requests"]["pending"] == 0
    assert invoke("status")[0] == 0

    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER confirm_audit_no_update")
        conn.exec_driver_sql("UPDATE confirm_audit SET actor = 'mallory' WHERE seq = 2")
    code, out, err = invoke("audit", "verify", "--json")
    assert code == 1 and json.loads(out)["bad_seq"] == 2
    store.close()


def test_help_texts() -> None:
    for args in (
        ["--help"],
        ["serve", "--help"],
        ["token", "create", "--help"],
        ["audit", "verify", "--help"],
    ):
        code, out, _ = invoke(*args)
        assert code == 0 and len(out) > 100, args


def test_first_serve_prints_an_admin_token_once(tmp_path: Path) -> None:
    db = str(tmp_path / "first.db")
    daemon = DaemonProcess(db).start()
    daemon.stop()
    log, out = daemon.log(), daemon.output()
    assert "admin token" in log and "/ui/login" in log
    # The token is printed once, on stdout only (stderr often lands in a shared log).
    raw = out.strip()
    assert raw.startswith("kct_") and len(out.strip().splitlines()) == 1
    assert raw not in log
    store = ConfirmationStore(db)
    assert store.authenticate(raw) is not None
    tokens = store.list_tokens()
    assert [(t.name, t.role) for t in tokens] == [("admin", "admin")]
    # Any later start finds a token and creates nothing (the command prints only what this returns).
    assert store.bootstrap_admin() is None
    store.close()


@pytest.mark.parametrize("bad", ["../x", "a b", ""])
def test_bad_token_names_are_refused(bad: str) -> None:
    code, _, err = invoke("token", "create", "--role", "agent", "--name", bad)
    assert code == 2 and "not allowed" in err


def test_an_unusable_database_path_is_one_clear_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, _, err = invoke(
        "token", "create", "--role", "agent", "--name", "x", "--db", str(blocker / "sub" / "c.db")
    )
    assert code != 0 and err.startswith("Error: Cannot open database") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_lookalike_of_a_high_risk_action_cannot_be_whitelisted(isolated_homes: Path) -> None:
    code, _, err = invoke("whitelist", "add", "DEPLOY-production")
    assert code != 0 and "high-risk" in err


def test_path_json_and_readable_audit_list(isolated_homes: Path) -> None:
    code, out, _ = invoke("path", "--json")
    assert code == 0 and json.loads(out) == {"database": str(isolated_homes / "kindling" / "confirm.db")}
    assert invoke("token", "create", "--role", "agent", "--name", "bot")[0] == 0
    assert invoke("whitelist", "add", "read_*", "--session", "s1")[0] == 0
    result = runner.invoke(app, ["confirm", "audit", "list"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    # key=value pairs, not a Python dict repr with quotes and braces
    assert "action=read_*" in text and "session_key=s1" in text
    assert "{'" not in result.stdout and "': " not in result.stdout
    # Readable at 80 columns: nothing cut, so ids and event names can be copied from it.
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "\u2026" not in result.stdout
    for word in ("whitelist_added", "token_created"):
        assert any(word in line for line in lines), result.stdout
    token_id = json.loads(invoke("token", "list", "--json")[1])[0]["id"]
    assert any(f"token_id={token_id}" in line for line in lines), result.stdout


def test_read_only_commands_create_no_database(isolated_homes: Path) -> None:
    home = isolated_homes / "kindling"
    for args in (
        ["status"],
        ["status", "--json"],
        ["token", "list"],
        ["token", "list", "--json"],
        ["whitelist", "list"],
        ["whitelist", "list", "--json"],
        ["audit", "list", "--json"],
        ["audit", "verify"],
        ["audit", "verify", "--json"],
    ):
        code, out, err = invoke(*args)
        assert code == 0, (args, err)
    code, out, _ = invoke("status", "--json")
    assert json.loads(out)["requests"]["pending"] == 0
    assert invoke("token", "list", "--json")[1].strip() == "[]"
    code, out, _ = invoke("audit", "verify")
    assert "No confirm database yet" in out and "intact" not in out  # nothing checked is not "intact"
    code, _, err = invoke("audit", "verify", "--expect-head", "3:" + "a" * 64)
    assert code == 1 and "no database" in err
    assert not (home / "confirm.db").exists()
    assert not home.exists() or list(home.iterdir()) == []


@pytest.mark.postgres
def test_read_only_commands_create_no_tables(tmp_path: Path, pg_url: str) -> None:
    # Another program's SQLite file, and an empty PostgreSQL database: nothing is created in either.
    foreign = tmp_path / "state.db"
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        conn.execute("CREATE TABLE sessions (id TEXT)")
    read_only = (["status"], ["token", "list"], ["whitelist", "list"], ["audit", "list"], ["audit", "verify"])
    for db in (str(foreign), pg_url):
        for args in read_only:
            code, out, err = invoke(*args, "--db", db)
            assert code == 0 and "No confirm database yet" in err + out, (args, db, err)
    with contextlib.closing(sqlite3.connect(foreign)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert tables == ["sessions"]
    engine = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []
    finally:
        engine.dispose()
    # Once the daemon's database exists, the same commands read it.
    assert invoke("token", "create", "--role", "agent", "--name", "bot", "--db", pg_url)[0] == 0
    code, out, _ = invoke("token", "list", "--json", "--db", pg_url)
    assert code == 0 and json.loads(out)[0]["name"] == "bot"


def test_pending_approve_and_deny_from_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kindling.confirm.client import ConfirmClient
    from test_confirm_support import daemon_settings, make_tokens, running

    db = str(tmp_path / "c.db")
    store = ConfirmationStore(db, daemon_settings(db))
    tokens = make_tokens(store)
    with running(store.settings, store) as server:
        monkeypatch.setenv("KINDLING_CONFIRM_URL", server.base_url)
        code, _, err = invoke("pending")
        assert code == 1 and "KINDLING_CONFIRM_APPROVER_TOKEN" in err
        monkeypatch.setenv("KINDLING_CONFIRM_APPROVER_TOKEN", tokens.approver)
        assert invoke("pending")[1].strip() == "Nothing is waiting for a decision."
        with ConfirmClient(server.base_url, tokens.agent) as agent:
            first = agent.submit(
                "rotate_keys", "Rotate the signing key", {"key": "sign\u200bing", "n": 2**70}
            )
            second = agent.submit("drop_table", "Drop users", {"table": "users"})
        code, out, _ = invoke("pending")
        assert code == 0 and out.index(first["id"]) < out.index(second["id"])
        assert first["digest"] in out and "Rotate the signing key" in out
        assert "WARNING" in out and "[U+200B invisible]" in out and str(2**70) in out
        code, out, _ = invoke("pending", "--json")
        assert [r["id"] for r in json.loads(out)] == [first["id"], second["id"]]
        assert json.loads(out)[0]["details"]["n"] == 2**70
        code, out, _ = invoke("approve", first["id"], "--reason", "checked")
        assert code == 0 and "approved by alice" in out
        code, _, err = invoke("deny", second["id"], "--digest", "0" * 64)
        assert code == 1 and "412" in err
        code, out, _ = invoke("deny", second["id"], "--reason", "no")
        assert code == 0 and "denied by alice" in out
        # A decided request: one line saying what it became, and no card promising a countdown.
        for verb in ("approve", "deny"):
            code, out, err = invoke(verb, second["id"])
            assert code == 1 and out == "", out
            assert err.startswith(f"Error: {second['id']} (drop_table) is already denied by alice at ")
            assert err.rstrip().endswith(f"UTC; nothing to {verb}.") and "left)" not in err
        # An agent token cannot decide from the terminal either.
        with ConfirmClient(server.base_url, tokens.agent) as agent:
            third = agent.submit("drop_index", "Drop an index", {"index": "users_email"})
        monkeypatch.setenv("KINDLING_CONFIRM_APPROVER_TOKEN", tokens.agent)
        code, _, err = invoke("deny", third["id"])
        assert code == 1 and "403" in err
    assert store.get(first["id"]).reason == "checked" and store.get(second["id"]).status == "denied"
    store.close()
