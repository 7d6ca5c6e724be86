"""Memory and skills written by kindling, read by the real Hermes Agent 0.19.0 (in its own venv).

Each test writes with kindling's stores here, then runs a short script inside the Hermes virtual
environment that uses Hermes's own MemoryStore, memory scan, skill validator, skill listing and
curator bookkeeping on the same files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_env import run_in_hermes
from hermes_probes import ALLOWED, BLOCKED
from kindling.review.memory import MemoryStore
from kindling.review.skills import SkillStore


def test_the_probe_lists_match_hermes_memory_scan(isolated_homes: Path) -> None:
    # kindling refuses every BLOCKED string and keeps every ALLOWED one (test_memory.py); here Hermes
    # confirms the lists say what its own scan does, so together: kindling refuses what Hermes refuses.
    verdicts = run_in_hermes(
        f"""
        import json
        from tools.memory_tool import _scan_memory_content
        blocked = {list(BLOCKED)!r}
        allowed = {list(ALLOWED)!r}
        print(json.dumps({{
            "missed": [s for s in blocked if not _scan_memory_content(s)],
            "flagged": [s for s in allowed if _scan_memory_content(s)],
        }}))
        """,
        isolated_homes / "hermes",
    )
    assert verdicts == {"missed": [], "flagged": []}
    for content in BLOCKED:
        assert MemoryStore().add("memory", content)["success"] is False, content


def test_memory_written_by_kindling_loads_in_hermes_with_its_limits(isolated_homes: Path) -> None:
    home = isolated_homes / "hermes"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        "memory:\n  memory_char_limit: 300\n  user_char_limit: 200\n", encoding="utf-8"
    )
    store = MemoryStore()
    assert store.add("memory", "The repo uses uv, not pip.")["success"] is True
    assert store.add("memory", "CI runs on Python 3.11.\nDeploys happen on Fridays.")["success"] is True
    assert store.add("user", "Prefers short answers.")["success"] is True
    assert store.add("memory", "x" * 605)["success"] is False  # the probe's 605 characters
    filler = "f" * (300 - len(store.path("memory").read_text(encoding="utf-8")) - 3)
    assert store.add("memory", filler)["success"] is True  # exactly at Hermes's limit
    assert store.add("memory", BLOCKED[1])["success"] is False

    seen = run_in_hermes(
        """
        import json
        from hermes_cli.config import load_config
        from tools.memory_tool import MemoryStore
        memory = load_config().get("memory") or {}
        store = MemoryStore(memory_char_limit=memory["memory_char_limit"], user_char_limit=memory["user_char_limit"])
        store.load_from_disk()
        prompt = (store.format_for_system_prompt("memory") or "") + (store.format_for_system_prompt("user") or "")
        print(json.dumps({
            "memory": store.memory_entries,
            "user": store.user_entries,
            "blocked_in_prompt": "BLOCKED" in prompt,
            "over_limit_add": store.add("memory", "one more entry")["success"],
            "fits_user": store.add("user", "Works in UTC.")["success"],
        }))
        """,
        home,
    )
    assert seen["memory"] == store.entries("memory") and len(seen["memory"]) == 3
    assert seen["user"] == ["Prefers short answers."]
    assert seen["blocked_in_prompt"] is False
    assert seen["over_limit_add"] is False  # kindling filled it to the limit; Hermes agrees it is full
    assert seen["fits_user"] is True and store.entries("user") == ["Prefers short answers.", "Works in UTC."]


def test_staged_memory_write_is_approved_by_hermes(isolated_homes: Path) -> None:
    home = isolated_homes / "hermes"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text("memory:\n  write_approval: true\n", encoding="utf-8")
    staged = MemoryStore().add("memory", "The staging bucket is s3://builds.")
    assert staged["staged"] is True and not MemoryStore().path("memory").exists()
    result = run_in_hermes(
        f"""
        import json
        from hermes_cli.write_approval_commands import handle_pending_subcommand
        from tools.memory_tool import MemoryStore
        store = MemoryStore()
        store.load_from_disk()
        listing = handle_pending_subcommand("memory", ["pending"], memory_store=store)
        approved = handle_pending_subcommand("memory", ["approve", "{staged["pending_id"]}"], memory_store=store)
        print(json.dumps({{"listing": listing, "approved": approved}}))
        """,
        home,
    )
    assert staged["pending_id"] in result["listing"] and "Approved 1 memory write" in result["approved"]
    assert MemoryStore().entries("memory") == ["The staging bucket is s3://builds."]


SKILL = """---
name: deploy-static-site
description: Build and publish a static site to the bucket.
version: 1.0.0
tags: [deploy, web]
---
# Deploy a static site

1. Run `make build`.
2. Sync `dist/` to the bucket.
"""


def test_skill_written_by_kindling_is_valid_listed_and_curated_by_hermes(isolated_homes: Path) -> None:
    home = isolated_homes / "hermes"
    store = SkillStore()
    assert store.create("deploy-static-site", SKILL, category="web")["success"] is True
    assert store.create("renamed", SKILL)["success"] is False  # Hermes would list it as deploy-static-site
    hermes_made = store.root / "from-hermes" / "SKILL.md"
    hermes_made.parent.mkdir(parents=True)
    hermes_made.write_text(
        "---\nname: from-hermes\ndescription: d\nmetadata:\n  hermes:\n    tags: [git]\n---\nbody\n",
        encoding="utf-8",
    )
    assert store.read("from-hermes").tags == ("git",)

    seen = run_in_hermes(
        """
        import json
        from pathlib import Path
        from tools.skill_manager_tool import _validate_frontmatter, _validate_name
        from tools.skills_tool import _find_all_skills, skill_view
        from tools.skill_usage import list_agent_created_skill_names
        text = Path("skills/web/deploy-static-site/SKILL.md").read_text(encoding="utf-8")
        view = json.loads(skill_view("deploy-static-site"))
        print(json.dumps({
            "frontmatter_error": _validate_frontmatter(text),
            "name_error": _validate_name("deploy-static-site"),
            "listed": sorted(s["name"] for s in _find_all_skills()),
            "tags": view.get("tags"),
            "curated": list_agent_created_skill_names(),
        }))
        """,
        home,
    )
    assert seen["frontmatter_error"] is None and seen["name_error"] is None
    assert seen["listed"] == ["deploy-static-site", "from-hermes"]
    assert seen["tags"] == ["deploy", "web"]
    assert seen["curated"] == ["deploy-static-site"]  # marked as review-created; Hermes's own skill is not
    usage = json.loads(store.usage_path.read_text(encoding="utf-8"))
    assert usage["deploy-static-site"]["created_by"] == "agent"


def test_prefill_file_from_kindling_warm_loads_in_hermes(isolated_homes: Path) -> None:
    from typer.testing import CliRunner

    from kindling.cli.main import app
    from kindling.templates.model import Example, Template
    from kindling.templates.store import open_store

    open_store().save(
        Template(
            name="prefill",
            examples=[
                Example(
                    tool_name="terminal",
                    context="Run the parser tests",
                    arguments={"command": "pytest -q"},
                    result="3 passed",
                )
            ],
        )
    )
    home = isolated_homes / "hermes"
    target = home / "prefill.json"
    runner = CliRunner()
    shown = runner.invoke(app, ["warm", "prefill", "--task", "Run the parser tests", "--json"])
    written = runner.invoke(
        app, ["warm", "prefill", "--task", "Run the parser tests", "--prefill-file", str(target)]
    )
    assert shown.exit_code == 0 and written.exit_code == 0, written.output
    messages = json.loads(shown.stdout)["messages"]
    assert json.loads(target.read_text(encoding="utf-8")) == messages and messages
    loaded = run_in_hermes(
        """
        import json
        from cli import _load_prefill_messages
        print(json.dumps(_load_prefill_messages("prefill.json")))  # relative: resolved from HERMES_HOME
        """,
        home,
    )
    assert loaded == messages
    refused = runner.invoke(
        app, ["warm", "prefill", "--task", "x", "--format", "anthropic", "--prefill-file", "p"]
    )
    assert refused.exit_code != 0 and "OpenAI-format" in refused.output


def test_a_missing_hermes_environment_fails_the_test_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hermes_env

    monkeypatch.setattr(hermes_env, "VENV", tmp_path / "no-hermes")
    with pytest.raises(pytest.fail.Exception, match=r"missing at .*no-hermes: run `make hermes-env`"):
        hermes_env.hermes_venv()
    broken = tmp_path / "broken"
    (broken / "bin").mkdir(parents=True)
    (broken / ".installed").touch()
    (broken / "bin" / "python").symlink_to("/bin/false")
    monkeypatch.setattr(hermes_env, "VENV", broken)
    with pytest.raises(pytest.fail.Exception, match=r"does not hold hermes-agent 0\.19\.0"):
        hermes_env.hermes_venv()
