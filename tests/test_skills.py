"""The Hermes-compatible skill store: SKILL.md layout, front matter, names, tool actions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kindling.agent import ToolRegistry
from kindling.errors import InvalidNameError, NotFoundError, StoreError
from kindling.review.skills import (
    SkillStore,
    hermes_front_matter,
    parse_front_matter,
    skills_dir,
    validate_skill_name,
)
from kindling.review.tools import skill_tools

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


def test_create_view_list_in_hermes_layout(isolated_homes: Path) -> None:
    store = SkillStore()
    assert store.root == isolated_homes / "hermes" / "skills" == skills_dir()
    created = store.create("deploy-static-site", SKILL)
    assert created == {
        "success": True,
        "message": "Skill 'deploy-static-site' created.",
        "path": str(store.root / "deploy-static-site" / "SKILL.md"),
    }
    store.create("pytest-fixtures", SKILL.replace("deploy-static-site", "pytest-fixtures"), category="python")
    assert (
        (store.root / "python" / "pytest-fixtures" / "SKILL.md")
        .read_text(encoding="utf-8")
        .startswith("---\nname: pytest")
    )

    skill = store.read("deploy-static-site")
    assert (skill.name, skill.category, skill.version, skill.tags) == (
        "deploy-static-site",
        None,
        "1.0.0",
        ("deploy", "web"),
    )
    assert skill.description == "Build and publish a static site to the bucket."
    # Written as Hermes reads tags: under metadata.hermes, the rest of the file as given.
    assert skill.content == SKILL.replace(
        "tags: [deploy, web]\n", "metadata:\n  hermes:\n    tags: [deploy, web]\n"
    )
    skills, broken = store.list()
    assert [(s.category, s.name) for s in skills] == [
        (None, "deploy-static-site"),
        ("python", "pytest-fixtures"),
    ]
    assert broken == []
    viewed = store.view("pytest-fixtures")
    assert viewed["success"] is True and viewed["category"] == "python" and "make build" in viewed["content"]


def test_patch_edit_delete() -> None:
    store = SkillStore()
    store.create("deploy-static-site", SKILL, category="web")
    assert (
        store.patch("deploy-static-site", "make build", "make site")["message"]
        == "Skill 'deploy-static-site' patched."
    )
    assert "make site" in store.read("deploy-static-site").content
    assert (
        store.patch("deploy-static-site", "nowhere", "x")["error"]
        == "old_string was not found in skill 'deploy-static-site'."
    )
    assert "occurs 2 times" in store.patch("deploy-static-site", "deploy", "x")["error"]
    broken = store.patch("deploy-static-site", "name: deploy-static-site\n", "")
    assert broken["success"] is False and "The patch would break SKILL.md" in broken["error"]
    edited = store.edit("deploy-static-site", SKILL.replace("1.0.0", "2.0.0"))
    assert (
        edited["message"] == "Skill 'deploy-static-site' updated."
        and store.read("deploy-static-site").version == "2.0.0"
    )
    assert store.delete("deploy-static-site") == {
        "success": True,
        "message": "Skill 'deploy-static-site' deleted.",
    }
    assert not (store.root / "web").exists()  # the emptied category goes too
    assert store.delete("deploy-static-site")["error"].startswith("Skill 'deploy-static-site' not found")
    with pytest.raises(NotFoundError):
        store.read("deploy-static-site")


@pytest.mark.parametrize(
    "name",
    ["", "../escape", "Upper", "-dash-first", "a/b", "x" * 65, ".hidden", "spa ce", "name\n"],
)
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidNameError):
        validate_skill_name(name)
    store = SkillStore()
    result = store.create(name, SKILL)
    assert result["success"] is False
    assert not any(store.root.parent.rglob("SKILL.md"))


def test_unsafe_category_is_refused() -> None:
    result = SkillStore().create("fine-name", SKILL, category="../../outside")
    assert result["success"] is False and "Invalid category" in result["error"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "cannot be empty"),
        ("# no front matter\n", "must start with YAML front matter"),
        ("---\nname: x\ndescription: y\n", "not closed"),
        ("---\n[unclosed\n---\nbody\n", "not valid YAML"),
        ("---\n- a list\n---\nbody\n", "must be a YAML mapping"),
        ("---\nname: x\n---\nbody\n", "must include 'description'"),
        ("---\ndescription: y\n---\nbody\n", "must include 'name'"),
        ("---\nname: x\ndescription: y\n---\n\n", "needs instructions"),
    ],
)
def test_front_matter_is_validated(content: str, reason: str) -> None:
    with pytest.raises(StoreError, match=reason):
        parse_front_matter(content)
    result = SkillStore().create("some-skill", content)
    assert result["success"] is False and reason in result["error"]


def test_duplicate_names_across_categories_are_refused() -> None:
    store = SkillStore()
    one = SKILL.replace("deploy-static-site", "one-skill")
    assert store.create("one-skill", one, category="a")["success"] is True
    result = store.create("one-skill", one, category="b")
    assert result["success"] is False and "already exists" in result["error"]


def test_broken_skill_is_listed_as_unreadable_not_dropped() -> None:
    store = SkillStore()
    store.create("good-skill", SKILL.replace("deploy-static-site", "good-skill"))
    bad = store.root / "bad-skill" / "SKILL.md"
    bad.parent.mkdir(parents=True)
    bad.write_text("no front matter", encoding="utf-8")
    archived = store.root / ".archive" / "old-skill" / "SKILL.md"
    archived.parent.mkdir(parents=True)
    archived.write_text(SKILL, encoding="utf-8")
    skills, broken = store.list()
    assert [s.name for s in skills] == ["good-skill"]
    assert [(p, "must start with YAML front matter" in why) for p, why in broken] == [(bad, True)]
    listed = store.list_result()
    assert listed["count"] == 1 and listed["unreadable"][0]["path"] == str(bad)


def test_skill_tools_dispatch_through_registry() -> None:
    registry = ToolRegistry.of(skill_tools())
    created = json.loads(
        registry.dispatch(
            "skill_manage", json.dumps({"action": "create", "name": "deploy-static-site", "content": SKILL})
        )
    )
    assert created["message"] == "Skill 'deploy-static-site' created."
    listed = json.loads(registry.dispatch("skills_list", "{}"))
    assert listed["skills"] == [
        {
            "name": "deploy-static-site",
            "category": None,
            "description": "Build and publish a static site to the bucket.",
        }
    ]
    viewed = json.loads(registry.dispatch("skill_view", {"name": "deploy-static-site"}))
    assert viewed["content"] == hermes_front_matter(SKILL) and viewed["tags"] == ["deploy", "web"]
    assert (
        json.loads(registry.dispatch("skill_manage", {"action": "explode", "name": "x"}))["success"] is False
    )
    assert json.loads(registry.dispatch("skill_manage", {"action": "create", "name": 3}))["success"] is False


def test_nested_categories_are_found_as_hermes_walks_them() -> None:
    store = SkillStore()
    nested = store.root / "mlops" / "training" / "axolotl" / "SKILL.md"
    nested.parent.mkdir(parents=True)
    nested.write_text(SKILL.replace("deploy-static-site", "axolotl"), encoding="utf-8")
    # A SKILL.md among a skill's support files is data, not a second skill.
    support = nested.parent / "references" / "upstream" / "SKILL.md"
    support.parent.mkdir(parents=True)
    support.write_text(SKILL.replace("deploy-static-site", "upstream"), encoding="utf-8")
    # A category merely called "scripts" is still a category.
    scripted = store.root / "scripts" / "lint-shell" / "SKILL.md"
    scripted.parent.mkdir(parents=True)
    scripted.write_text(SKILL.replace("deploy-static-site", "lint-shell"), encoding="utf-8")
    (store.root / "loop").symlink_to(store.root, target_is_directory=True)  # must not hang

    skills, broken = store.list()
    assert [(s.category, s.name) for s in skills] == [
        ("mlops/training", "axolotl"),
        ("scripts", "lint-shell"),
    ]
    assert broken == []
    assert store.read("axolotl").path == nested
    with pytest.raises(NotFoundError):
        store.read("upstream")
    # Hermes refuses a second skill with a name that already exists anywhere in the tree.
    duplicate = store.create("axolotl", SKILL.replace("deploy-static-site", "axolotl"))
    assert duplicate["success"] is False and "already exists" in duplicate["error"]
    assert not (store.root / "axolotl").exists()


def test_archive_moves_the_skill_out_of_sight_and_keeps_it() -> None:
    store = SkillStore()
    store.create("deploy-static-site", SKILL, category="web")
    first = store.delete("deploy-static-site", archive=True)
    assert first["success"] is True and first["message"] == "Skill 'deploy-static-site' archived."
    kept = Path(first["archived_to"])
    assert kept.parent == store.root / ".archive"
    assert (kept / "SKILL.md").read_text(encoding="utf-8") == hermes_front_matter(SKILL)
    assert store.list() == ([], []) and not (store.root / "web").exists()
    store.create("deploy-static-site", SKILL)
    second = store.delete("deploy-static-site", archive=True)  # same second: a fresh name, nothing lost
    assert Path(second["archived_to"]) != kept and (Path(second["archived_to"]) / "SKILL.md").is_file()
    assert (kept / "SKILL.md").is_file()


def test_review_tools_archive_instead_of_deleting() -> None:
    from kindling.review.tools import review_tools

    store = SkillStore()
    store.create("deploy-static-site", SKILL)
    registry = ToolRegistry.of(review_tools(skill_store=store, memory=False))
    result = json.loads(registry.dispatch("skill_manage", {"action": "delete", "name": "deploy-static-site"}))
    assert result["message"] == "Skill 'deploy-static-site' archived."
    assert (Path(result["archived_to"]) / "SKILL.md").read_text(encoding="utf-8") == hermes_front_matter(
        SKILL
    )
    plain = ToolRegistry.of(skill_tools(store))
    store.create("deploy-static-site", SKILL)
    deleted = json.loads(plain.dispatch("skill_manage", {"action": "delete", "name": "deploy-static-site"}))
    assert deleted["message"] == "Skill 'deploy-static-site' deleted."


def test_tags_are_read_from_metadata_hermes_first_and_written_there() -> None:
    store = SkillStore()
    hermes_style = store.root / "from-hermes" / "SKILL.md"
    hermes_style.parent.mkdir(parents=True)
    hermes_style.write_text(
        "---\nname: from-hermes\ndescription: d\nmetadata:\n  hermes:\n    tags: [git, review]\n"
        "tags: ignored-when-metadata-has-tags\n---\nbody\n",
        encoding="utf-8",
    )
    assert store.read("from-hermes").tags == ("git", "review")
    text_tags = store.root / "text-tags" / "SKILL.md"
    text_tags.parent.mkdir(parents=True)
    text_tags.write_text(
        '---\nname: text-tags\ndescription: d\ntags: "[a, b]"\n---\nbody\n', encoding="utf-8"
    )
    assert store.read("text-tags").tags == ("a", "b")
    # A comment and the key order survive the move of tags under metadata.hermes.
    commented = "---\nname: kept\n# why this skill exists\ndescription: d\ntags: [x]\nversion: 2\n---\nbody\n"
    assert store.create("kept", commented)["success"] is True
    written = store.read("kept").content
    assert written.startswith("---\nname: kept\n# why this skill exists\ndescription: d\nversion: 2\n")
    assert parse_front_matter(written)[0]["metadata"] == {"hermes": {"tags": ["x"]}}
    assert store.read("kept").tags == ("x",) and written.endswith("---\nbody\n")


def test_front_matter_name_must_equal_the_folder_name() -> None:
    store = SkillStore()
    result = store.create("folder-name", SKILL)
    assert (
        result["success"] is False and "must equal the skill's folder name 'folder-name'" in result["error"]
    )
    assert not (store.root / "folder-name").exists()
    store.create("deploy-static-site", SKILL)
    renamed = store.patch("deploy-static-site", "name: deploy-static-site", "name: other")
    assert renamed["success"] is False and "folder name" in renamed["error"]
    edited = store.edit("deploy-static-site", SKILL.replace("name: deploy-static-site", "name: other"))
    assert (
        edited["success"] is False and store.read("deploy-static-site").meta["name"] == "deploy-static-site"
    )


def test_usage_sidecar_marks_review_created_skills_as_hermes_does() -> None:
    store = SkillStore()
    store.create("deploy-static-site", SKILL)
    record = store.usage()["deploy-static-site"]
    assert record["created_by"] == "agent" and record["state"] == "active" and record["patch_count"] == 0
    assert set(record) >= {"use_count", "view_count", "last_used_at", "created_at", "pinned", "archived_at"}
    store.patch("deploy-static-site", "make build", "make site")
    store.edit("deploy-static-site", SKILL)
    assert store.usage()["deploy-static-site"]["patch_count"] == 2
    store.delete("deploy-static-site", archive=True)
    assert store.usage()["deploy-static-site"]["state"] == "archived"
    store.create("deploy-static-site", SKILL)
    store.delete("deploy-static-site")
    assert "deploy-static-site" not in store.usage()
    # A skill a person asked for (not a review) is theirs: never marked for the curator.
    person = SkillStore(review_created=False)
    person.create("mine", SKILL.replace("deploy-static-site", "mine"))
    assert "mine" not in person.usage()
    # A broken sidecar reads as empty (as in Hermes) and is rewritten whole on the next write.
    store.usage_path.write_text("{broken", encoding="utf-8")
    store.create("again", SKILL.replace("deploy-static-site", "again"))
    assert list(store.usage()) == ["again"]


def test_write_approval_stages_skill_writes_in_hermes_pending_format(isolated_homes: Path) -> None:
    config = isolated_homes / "hermes" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("skills:\n  write_approval: true\n", encoding="utf-8")
    store = SkillStore()
    assert store.write_approval is True
    staged = store.create("deploy-static-site", SKILL, category="web")
    assert staged["success"] is True and staged["staged"] is True
    assert not any(store.root.rglob("SKILL.md"))
    record = json.loads((store.pending_dir / f"{staged['pending_id']}.json").read_text(encoding="utf-8"))
    assert store.pending_dir == isolated_homes / "hermes" / "pending" / "skills"
    assert record["subsystem"] == "skills" and record["origin"] == "background_review"
    assert record["payload"] == {
        "action": "create",
        "name": "deploy-static-site",
        "content": hermes_front_matter(SKILL),
        "category": "web",
    }
