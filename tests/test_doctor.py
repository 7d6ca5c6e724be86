"""``kindling doctor``: each failure it names, found on a real set-up broken that way, with its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from fake_openai import FakeOpenAI
from kindling.cli.main import app
from kindling.confirm.server import ServerThread
from kindling.confirm.store import ConfirmationStore
from kindling.doctor import Check, DoctorOptions, check_clock, diagnose, healthy
from kindling.hermes_config import enable_plugin
from kindling.sessions.sample import generate_sample_db
from kindling.templates.model import Example, Template
from kindling.templates.store import open_store
from test_confirm_support import daemon_settings, free_port, make_tokens

runner = CliRunner()


def found(checks: list[Check], name: str) -> Check:
    matching = [c for c in checks if c.name == name]
    assert len(matching) == 1, [c.name for c in checks]
    return matching[0]


def failing(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks if c.status == "fail"}


@pytest.fixture(autouse=True)
def no_daemon_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "KINDLING_CONFIRM_URL",
        "KINDLING_CONFIRM_TOKEN",
        "KINDLING_CONFIRM_APPROVER_TOKEN",
        "KINDLING_CONFIRM_DB",
        "KINDLING_PROXY_URL",
        "KINDLING_PROXY_DB",
    ):
        monkeypatch.delenv(name, raising=False)


def test_a_fresh_set_up_is_healthy_and_the_cli_says_so() -> None:
    checks = diagnose(DoctorOptions())
    assert healthy(checks), failing(checks)
    assert found(checks, "home").status == "ok"
    assert found(checks, "confirm store").status == "skip"
    result = runner.invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["ok"] is True and {c["name"] for c in data["checks"]} >= {"home", "clock", "confirm store"}
    human = runner.invoke(app, ["doctor"])
    assert human.exit_code == 0 and "All good." in human.output


def test_a_home_that_is_not_a_directory_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("KINDLING_HOME", str(blocker))
    check = found(diagnose(DoctorOptions()), "home")
    assert check.status == "fail" and "not a directory" in check.detail
    assert check.fix == f"Make {blocker} a writable directory, or point KINDLING_HOME at one."
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1 and "1 problem(s) found." in result.output


def test_a_clock_that_cannot_be_right_fails() -> None:
    check = check_clock(0.0)
    assert check.status == "fail" and "1970-01-01" in check.detail
    assert check.fix == "Set the system clock (timedatectl set-ntp true)."
    assert check_clock(5_000_000_000.0).status == "fail"
    checks = diagnose(DoctorOptions(), now=lambda: 1_000_000.0)
    assert set(failing(checks)) == {"clock"}


def test_a_confirm_database_behind_or_ahead_of_this_kindling_fails(tmp_path: Path) -> None:
    db = str(tmp_path / "confirm.db")
    ConfirmationStore(db, daemon_settings(db)).close()
    assert found(diagnose(DoctorOptions(confirm_db=db)), "confirm store").status == "ok"
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM kindling_migrations WHERE name LIKE 'm001%'"))
    behind = found(diagnose(DoctorOptions(confirm_db=db)), "confirm store")
    assert behind.status == "fail" and "lacks 1 migration" in behind.detail
    assert behind.fix == "Start the daemon once (kindling confirm serve) to apply the migrations."
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO kindling_migrations (component, name, applied_at) VALUES "
                "('confirm', 'm001_initial', 'x'), ('confirm', 'm999_later', 'x')"
            )
        )
    engine.dispose()
    ahead = found(diagnose(DoctorOptions(confirm_db=db)), "confirm store")
    assert ahead.status == "fail" and "m999_later" in ahead.detail
    assert ahead.fix == "Upgrade kindling here to the release that wrote it (pip install -U kindling-agent)."


def test_an_unreadable_confirm_database_fails(tmp_path: Path) -> None:
    db = tmp_path / "confirm.db"
    db.write_bytes(b"this is not a database" * 100)
    check = found(diagnose(DoctorOptions(confirm_db=str(db))), "confirm store")
    assert check.status == "fail" and "Cannot read" in check.detail
    assert check.fix.startswith("Check KINDLING_CONFIRM_DB (or --db)")


def test_a_daemon_that_does_not_answer_fails() -> None:
    options = DoctorOptions(confirm_url=f"http://127.0.0.1:{free_port()}", agent_token="kct_x", timeout=1)
    check = found(diagnose(options), "confirm daemon")
    assert check.status == "fail" and "does not answer" in check.detail
    assert check.fix.startswith("Start it (kindling confirm serve")


def test_each_token_must_have_its_users_role(tmp_path: Path) -> None:
    db = str(tmp_path / "daemon.db")
    store = ConfirmationStore(db, daemon_settings(db))
    tokens = make_tokens(store)
    with ServerThread(store.settings, store) as server:
        good = diagnose(
            DoctorOptions(
                confirm_url=server.base_url, agent_token=tokens.agent, approver_token=tokens.approver
            )
        )
        assert found(good, "confirm daemon").status == "ok"
        assert found(good, "confirm daemon clock").status == "ok"
        assert (
            found(good, "agent token (KINDLING_CONFIRM_TOKEN)").detail == "An agent token, as its user needs."
        )
        assert found(good, "approver token (KINDLING_CONFIRM_APPROVER_TOKEN)").status == "ok"
        swapped = diagnose(
            DoctorOptions(
                confirm_url=server.base_url, agent_token=tokens.approver, approver_token=tokens.agent
            )
        )
        agent = found(swapped, "agent token (KINDLING_CONFIRM_TOKEN)")
        assert agent.status == "fail" and "could decide requests" in agent.detail
        assert (
            agent.fix == "Create one with kindling confirm token create --role agent --name NAME and set it."
        )
        approver = found(swapped, "approver token (KINDLING_CONFIRM_APPROVER_TOKEN)")
        assert approver.status == "fail" and "cannot decide" in approver.detail
        assert "--role approver" in approver.fix
        assert "confirm daemon ready" not in {c.name for c in good}
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DELETE FROM kindling_migrations WHERE name LIKE 'm001%'")
        not_ready = found(diagnose(DoctorOptions(confirm_url=server.base_url)), "confirm daemon ready")
        assert not_ready.status == "fail" and "lacks 1 migration" in not_ready.detail
        assert not_ready.fix.startswith("Read the daemon's log")
        with store.engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO kindling_migrations (component, name, applied_at) VALUES ('confirm', 'm001_initial', 'x')"
            )
        unknown = found(
            diagnose(DoctorOptions(confirm_url=server.base_url, agent_token="kct_revoked")),
            "agent token (KINDLING_CONFIRM_TOKEN)",
        )
        assert unknown.status == "fail" and "unknown or revoked" in unknown.detail
    store.close()


def test_the_hermes_plugin_must_be_enabled_and_warm_up_needs_templates(isolated_homes: Path) -> None:
    hermes = isolated_homes / "hermes"
    hermes.mkdir(parents=True)
    (hermes / "config.yaml").write_text("model: x\n")
    checks = diagnose(DoctorOptions())
    plugin = found(checks, "hermes plugin")
    assert plugin.status == "fail" and "not enabled" in plugin.detail
    assert plugin.fix == "Run kindling hermes install."
    enable_plugin()
    checks = diagnose(DoctorOptions(confirm_url=None))
    assert found(checks, "hermes plugin").status == "ok"
    # Enabled, it warms every session: with no template that is a failure.
    templates = found(checks, "templates")
    assert templates.status == "fail" and "nothing to show" in templates.detail
    assert templates.fix == f"Build one: kindling build main {hermes / 'state.db'}"
    (hermes / "config.yaml").write_text("plugins:\n  enabled: [kindling]\n  disabled: [kindling]\n")
    disabled = found(diagnose(DoctorOptions()), "hermes plugin")
    assert disabled.status == "fail" and disabled.fix.startswith("Remove kindling from plugins.disabled")


def test_tools_recent_sessions_use_without_examples_are_named(isolated_homes: Path) -> None:
    generate_sample_db(isolated_homes / "hermes" / "state.db", sessions=30)
    open_store().save(
        Template(name="main", examples=[Example(tool_name="read_file", context="c", result="r")])
    )
    checks = diagnose(DoctorOptions())
    assert found(checks, "templates").status == "ok"
    tools = found(checks, "tools without examples")
    assert tools.status == "warn" and "terminal" in tools.detail and "read_file" not in tools.detail
    assert tools.fix.startswith("Rebuild the template from recent sessions: kindling build main")
    assert healthy(checks)  # a warning, not a failure


def test_the_proxys_upstream_must_answer(fake_openai: FakeOpenAI) -> None:
    up = found(diagnose(DoctorOptions(upstream=fake_openai.base_url)), "proxy upstream")
    assert up.status == "ok"
    down = found(
        diagnose(DoctorOptions(upstream=f"http://127.0.0.1:{free_port()}/v1", timeout=1)), "proxy upstream"
    )
    assert down.status == "fail" and down.fix == "Start the model server, or fix the proxy's --upstream URL."
    result = runner.invoke(
        app, ["doctor", "--json", "--upstream", f"http://127.0.0.1:{free_port()}/v1", "--timeout", "1"]
    )
    assert result.exit_code == 1
    assert json.loads(result.output)["ok"] is False


def test_the_doctor_changes_nothing(isolated_homes: Path) -> None:
    (isolated_homes / "kindling").mkdir(parents=True)
    (isolated_homes / "hermes").mkdir()
    (isolated_homes / "hermes" / "config.yaml").write_text("plugins:\n  enabled: [kindling]\n")
    db = str(isolated_homes / "kindling" / "confirm.db")
    ConfirmationStore(db, daemon_settings(db)).close()
    before = sorted((path, sorted(files)) for path, _, files in os.walk(isolated_homes))
    checks = diagnose(DoctorOptions(confirm_db=db))
    assert found(checks, "confirm store").status == "ok" and found(checks, "templates").status == "fail"
    assert sorted((path, sorted(files)) for path, _, files in os.walk(isolated_homes)) == before


def test_a_running_proxy_its_store_and_its_upstream_answer(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    from proxy_support import running_proxy

    with running_proxy(fake_openai.base_url, tmp_path / "proxy.db") as proxy:
        checks = diagnose(DoctorOptions(proxy_url=proxy.base_url))
    assert found(checks, "proxy").status == "ok" and fake_openai.base_url in found(checks, "proxy").detail
    assert found(checks, "proxy store").status == "ok"
    upstream = found(checks, "proxy upstream")
    assert upstream.status == "ok" and "answers the proxy" in upstream.detail
    assert healthy(checks)


def test_a_proxys_dead_upstream_fails_with_its_fix(tmp_path: Path) -> None:
    from proxy_support import running_proxy

    with running_proxy(f"http://127.0.0.1:{free_port()}/v1", tmp_path / "proxy.db") as proxy:
        checks = diagnose(DoctorOptions(proxy_url=proxy.base_url))
    upstream = found(checks, "proxy upstream")
    assert upstream.status == "fail" and "does not answer" in upstream.detail
    assert upstream.fix == "Start the model server, or fix the proxy's --upstream URL and restart it."
    assert found(checks, "proxy").status == "ok" and not healthy(checks)


def test_a_proxys_store_from_a_newer_kindling_fails_with_its_fix(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    from kindling.proxy.recorder import ProxyStore
    from proxy_support import running_proxy

    db = tmp_path / "proxy.db"
    store = ProxyStore(db)
    store.ensure_ready()
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO kindling_migrations (component, name, applied_at) "
                "VALUES ('proxy', 'm999_from_the_future', 'now')"
            )
        )
    store.close()
    with running_proxy(fake_openai.base_url, db) as proxy:
        checks = diagnose(DoctorOptions(proxy_url=proxy.base_url))
    store_check = found(checks, "proxy store")
    assert store_check.status == "fail" and "m999_from_the_future" in store_check.detail
    assert store_check.fix.startswith("Upgrade kindling where the proxy runs")
    assert found(checks, "proxy upstream").status == "ok"


def test_a_configured_proxy_that_does_not_answer_fails(fake_openai: FakeOpenAI) -> None:
    gone = found(diagnose(DoctorOptions(proxy_url=f"http://127.0.0.1:{free_port()}", timeout=1)), "proxy")
    assert gone.status == "fail" and "does not answer" in gone.detail
    assert gone.fix.startswith("Start it (kindling proxy --upstream URL")
    # Something else answering there is named as such.
    other = found(diagnose(DoctorOptions(proxy_url=fake_openai.root_url)), "proxy")
    assert other.status == "fail" and "not a kindling proxy" in other.detail
    result = runner.invoke(
        app, ["doctor", "--json", "--proxy-url", f"http://127.0.0.1:{free_port()}", "--timeout", "1"]
    )
    assert result.exit_code == 1 and json.loads(result.output)["ok"] is False
    # Not configured, and no proxy has recorded here: nothing to check.
    assert found(diagnose(DoctorOptions()), "proxy").status == "skip"


def test_tools_the_proxys_conversations_use_without_examples_are_named(
    isolated_homes: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openai

    from fake_openai import text, tool_call
    from kindling.proxy.settings import default_db
    from proxy_support import TOOLS, running_proxy, wait_recorded

    open_store().save(
        Template(name="main", examples=[Example(tool_name="read_file", context="c", result="r")])
    )
    fake_openai.script = [tool_call("terminal", {"path": "make test"}), text("Done.")]
    with running_proxy(fake_openai.base_url, default_db(), build_every=0) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="sk-test", max_retries=0)
        messages: list[dict[str, object]] = [{"role": "user", "content": "Run the tests"}]
        reply = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        messages.append(
            {"role": "tool", "tool_call_id": reply.choices[0].message.tool_calls[0].id, "content": "ok"}
        )  # type: ignore[index]
        client.chat.completions.create(model="m", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        wait_recorded(proxy.base_url)
        monkeypatch.setenv("KINDLING_PROXY_URL", proxy.base_url)
        checks = diagnose(DoctorOptions.from_env())
    tools = found(checks, "proxy tools without examples")
    assert tools.status == "warn" and "terminal" in tools.detail and "read_file" not in tools.detail
    assert tools.fix.endswith(f"kindling build proxy-default {default_db()} --tenant default")
    assert found(checks, "proxy").status == "ok"
