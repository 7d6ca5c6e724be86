"""Templates: names, the model, legacy formats, and both stores (JSON files, SQLite, PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kindling.errors import InvalidNameError, NotFoundError, StoreError, TemplateError
from kindling.mining.model import Example, OutcomeStatus
from kindling.templates import JsonDirStore, SqlStore, Template, TemplateStore, open_store
from kindling.templates.model import LEGACY_KEYS, detect_template_format, export_template, parse_template

WARM_SESSIONS_FILE = {
    "name": "deploy-helper",
    "description": "Deploying the web app",
    "examples": [
        {
            "tool_name": "terminal",
            "arguments": {"command": "make deploy"},
            "result_summary": "deployed v1.2",
            "result_success": True,
            "context_hint": "Deploy the app to staging",
        },
        {
            "tool_name": "read_file",
            "arguments": {"path": "deploy.yaml"},
            "result_summary": "replicas: 2",
            "result_success": False,
            "context_hint": "Check the deploy config",
        },
    ],
    "system_prompt_addendum": "Deploys go to staging first.",
    "tags": ["deploy", "ops"],
    "source_session_ids": ["s1", "s2"],
    "created_at": "2025-01-02T03:04:05+00:00",
    "version": 3,
}

SESSION_TEMPLATES_FILE = {
    "name": "code-fixes",
    "task_type": "code",
    "examples": [
        {"tool_name": "patch", "arguments": {"file": "a.py"}, "result": "applied", "success": True},
        {"tool_name": "terminal", "arguments": {"command": "pytest"}, "result": "1 failed", "success": False},
    ],
    "description": "Fixing code",
    "created_at": 1735787045.0,
    "usage_count": 7,
    "source_session_id": "sess-9",
}


def make_template(name: str = "alpha", n: int = 3, **fields: Any) -> Template:
    examples = [
        Example(
            tool_name=f"tool_{i % 2}",
            arguments={"i": i},
            result=f"result {i}",
            context=f"do step {i}",
            session_id=f"s{i}",
        )
        for i in range(n)
    ]
    return Template(name=name, examples=examples, **fields)


# ---------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "bad", ["../x", "a/b", "a\\b", ".hidden", "", "x" * 65, "sp ace", "nul\x00", "..", "é"]
)
def test_unsafe_names_get_a_clear_error(bad: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        JsonDirStore().path_for(bad)
    assert info.value.name == bad
    assert str(info.value)


@pytest.mark.parametrize("good", ["a", "code-fixes", "v1.2_x", "x" * 64, "A.b-C_d"])
def test_safe_names_are_accepted(good: str, tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path)
    assert store.path_for(good) == tmp_path / f"{good}.json"
    assert store.save(make_template(good)).name == good


def test_template_model_rejects_bad_name_and_task_type() -> None:
    with pytest.raises(InvalidNameError, match="only contain"):
        Template(name="a/etc")
    with pytest.raises(Exception, match="task_type"):
        Template(name="ok", task_type="cooking")


# ---------------------------------------------------------------------------------------------- legacy


def test_warm_sessions_file_loads() -> None:
    assert detect_template_format(WARM_SESSIONS_FILE) == "warm_sessions"
    t = parse_template(WARM_SESSIONS_FILE)
    assert t.name == "deploy-helper"
    assert t.version == 3
    assert t.tags == ["deploy", "ops"]
    assert t.system_prompt_addendum == "Deploys go to staging first."
    assert [e.tool_name for e in t.examples] == ["terminal", "read_file"]
    assert t.examples[0].context == "Deploy the app to staging"
    assert t.examples[0].result == "deployed v1.2"
    assert t.examples[1].outcome is OutcomeStatus.FAILED


def test_session_templates_file_loads() -> None:
    assert detect_template_format(SESSION_TEMPLATES_FILE) == "session-templates"
    t = parse_template(SESSION_TEMPLATES_FILE)
    assert t.task_type == "code"
    assert t.usage_count == 7
    assert t.source_session_ids == ["sess-9"]
    assert t.created_at.startswith("2025-01-02")
    assert t.examples[0].result == "applied"
    assert t.examples[1].outcome is OutcomeStatus.FAILED


def test_legacy_arguments_may_be_json_text() -> None:
    examples = [
        {"tool_name": "terminal", "arguments": '{"command": "make"}', "result": "ok", "success": True},
        {"tool_name": "terminal", "arguments": "ls -la", "result": "ok", "success": True},
        {"tool_name": "terminal", "arguments": None, "result": "ok", "success": True},
    ]
    t = parse_template({**SESSION_TEMPLATES_FILE, "examples": examples})
    assert [(e.arguments, e.raw_arguments) for e in t.examples] == [
        ({"command": "make"}, None),
        ({}, "ls -la"),
        ({}, None),
    ]
    exported = export_template(t, "session-templates")["examples"]
    assert [e["arguments"] for e in exported] == [{"command": "make"}, "ls -la", {}]
    with pytest.raises(TemplateError, match="arguments must be an object"):
        parse_template({**SESSION_TEMPLATES_FILE, "examples": [{**examples[0], "arguments": 5}]})


@pytest.mark.parametrize(
    ("fmt", "source"), [("warm_sessions", WARM_SESSIONS_FILE), ("session-templates", SESSION_TEMPLATES_FILE)]
)
def test_legacy_export_has_exactly_its_keys_and_round_trips(fmt: str, source: dict[str, Any]) -> None:
    top_keys, example_keys = LEGACY_KEYS[fmt]
    template = parse_template(source)
    exported = export_template(template, fmt)
    assert tuple(exported) == top_keys
    for example in exported["examples"]:
        assert tuple(example) == example_keys
    # Export then load again: the same template content.
    again = parse_template(json.loads(json.dumps(exported)))
    assert [e.model_dump(exclude={"session_id"}) for e in again.examples] == [
        e.model_dump(exclude={"session_id"}) for e in template.examples
    ]
    assert again.name == template.name
    assert again.description == template.description
    # An exported legacy file equals the original file (nothing invented, nothing lost), down to
    # the type of created_at: an ISO string in warm_sessions, epoch seconds in session-templates.
    assert exported == source
    assert type(exported["created_at"]) is type(source["created_at"])


def test_format_detection_is_not_fooled_by_shared_keys() -> None:
    native = export_template(make_template(tags=["x"], system_prompt_addendum="s"))
    del native["schema_version"]
    assert detect_template_format(native) == "kindling"
    native["examples"] = []
    assert detect_template_format(native) == "kindling"
    assert detect_template_format({**WARM_SESSIONS_FILE, "examples": []}) == "warm_sessions"
    assert detect_template_format({**SESSION_TEMPLATES_FILE, "examples": []}) == "session-templates"
    assert detect_template_format({"name": "bare"}) == "kindling"


def test_kindling_export_round_trips() -> None:
    template = make_template(tags=["x"], task_type="mixed")
    assert parse_template(export_template(template)) == template


def test_invalid_template_data_names_the_problem() -> None:
    with pytest.raises(TemplateError, match="broken"):
        parse_template({"name": "broken", "schema_version": 1, "examples": [{"arguments": {}}]})
    with pytest.raises(TemplateError):
        parse_template(["not", "an", "object"])
    with pytest.raises(TemplateError, match="Unknown template format"):
        export_template(make_template(), "yaml")


# ---------------------------------------------------------------------------------------------- stores

STORE_KINDS = ["json", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def store_target(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "json":
        return str(tmp_path / "templates")
    if kind == "sqlite":
        return str(tmp_path / "templates.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def target(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return store_target(store_kind, tmp_path, request)


@pytest.fixture
def store(target: str) -> Iterator[TemplateStore]:
    opened = open_store(target)
    yield opened
    if isinstance(opened, SqlStore):
        opened.close()


def test_open_store_picks_the_kind(tmp_path: Path) -> None:
    assert isinstance(open_store(), JsonDirStore)
    assert isinstance(open_store(tmp_path / "dir"), JsonDirStore)
    sql = open_store(tmp_path / "t.db")
    assert isinstance(sql, SqlStore)
    sql.close()
    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(StoreError):
        open_store(tmp_path / "plain.txt")


def test_save_get_list_delete(store: TemplateStore) -> None:
    saved = store.save(make_template("alpha", tags=["a"]))
    assert saved.version == 1
    store.save(make_template("beta", n=1))
    assert [t.name for t in store.list()] == ["alpha", "beta"]
    got = store.get("alpha")
    assert got.tags == ["a"]
    assert [e.tool_name for e in got.examples] == ["tool_0", "tool_1", "tool_0"]
    store.delete("alpha")
    assert [t.name for t in store.list()] == ["beta"]
    with pytest.raises(NotFoundError):
        store.get("alpha")
    with pytest.raises(NotFoundError):
        store.delete("alpha")
    with pytest.raises(InvalidNameError):
        store.get("../beta")


def test_saving_again_bumps_version_and_keeps_earlier_ones(store: TemplateStore) -> None:
    store.save(make_template("alpha", n=1, description="first"))
    store.record_use("alpha")
    second = store.save(make_template("alpha", n=2, description="second"))
    assert second.version == 2
    assert second.usage_count == 1  # usage belongs to the name, not to one version
    third = store.save(make_template("alpha", n=3, description="third"))
    assert third.version == 3
    assert store.versions("alpha") == [1, 2, 3]
    assert store.get("alpha").description == "third"
    assert store.get("alpha", 1).description == "first"
    assert len(store.get("alpha", 2).examples) == 2
    assert store.get("alpha", 3).created_at == store.get("alpha", 1).created_at
    with pytest.raises(NotFoundError):
        store.get("alpha", 9)


def test_record_use_counts(store: TemplateStore) -> None:
    store.save(make_template("alpha"))
    assert [store.record_use("alpha") for _ in range(3)] == [1, 2, 3]
    assert store.get("alpha").usage_count == 3
    with pytest.raises(NotFoundError):
        store.record_use("nope")


def test_corrupt_template_is_reported_and_skipped_while_the_rest_load(
    store: TemplateStore, store_kind: str
) -> None:
    store.save(make_template("good"))
    store.save(make_template("bad"))
    if isinstance(store, JsonDirStore):
        store.path_for("bad").write_text('{"name": "bad", "schema_version": 1, "examples": [')
    else:
        assert isinstance(store, SqlStore)
        with store.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE kindling_template_versions SET data = '{oops' WHERE name = 'bad'")
    assert [t.name for t in store.list()] == ["good"]
    assert len(store.problems) == 1
    assert "bad" in store.problems[0].location
    assert store.problems[0].reason
    with pytest.raises(TemplateError):
        store.get("bad")


def test_saving_over_a_corrupt_file_keeps_earlier_versions(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path)
    for description in ("first", "second", "third"):
        store.save(make_template("alpha", description=description))
    store.path_for("alpha").write_text("{half a fi")  # version 3 is lost; 1 and 2 are on disk
    saved = store.save(make_template("alpha", description="fourth"))
    # Numbered past the versions on disk, so none of them is shadowed or later overwritten.
    assert saved.version == 3
    store.save(make_template("alpha", description="fifth"))
    assert store.versions("alpha") == [1, 2, 3, 4]
    descriptions = [store.get("alpha", v).description for v in (1, 2, 3, 4)]
    assert descriptions == ["first", "second", "fourth", "fifth"]
    # The unreadable bytes were kept beside the versions, not thrown away.
    kept = list((tmp_path / "alpha.versions").glob("corrupt-*.json"))
    assert [p.read_text() for p in kept] == ["{half a fi"]


def test_json_store_loads_legacy_files_in_its_directory(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path)
    (tmp_path / "deploy-helper.json").write_text(json.dumps(WARM_SESSIONS_FILE))
    (tmp_path / "code-fixes.json").write_text(json.dumps(SESSION_TEMPLATES_FILE))
    assert [t.name for t in store.list()] == ["code-fixes", "deploy-helper"]
    assert store.record_use("code-fixes") == 8
    # The first kindling save keeps the legacy file as an earlier version.
    store.save(store.get("deploy-helper"))
    assert store.versions("deploy-helper") == [3, 4]


def test_json_store_keeps_a_legacy_file_as_it_was_before_converting_it(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path)
    legacy = json.dumps(SESSION_TEMPLATES_FILE).encode()
    (tmp_path / "code-fixes.json").write_bytes(legacy)
    assert store.record_use("code-fixes") == 8
    assert detect_template_format(json.loads(store.path_for("code-fixes").read_text())) == "kindling"
    original = tmp_path / "code-fixes.versions" / "original-session-templates.json"
    assert original.read_bytes() == legacy
    store.record_use("code-fixes")
    store.save(make_template("code-fixes"))
    assert original.read_bytes() == legacy  # kept once, never overwritten by later writes
    assert store.versions("code-fixes") == [1, 2]


def test_json_store_file_name_is_the_template_name(tmp_path: Path) -> None:
    store = JsonDirStore(tmp_path)
    # Legacy tools allowed names a path cannot hold; the file name is what addresses the template.
    (tmp_path / "deploy.json").write_text(json.dumps({**WARM_SESSIONS_FILE, "name": "Deploy helper v2"}))
    assert [t.name for t in store.list()] == ["deploy"]
    assert store.get("deploy").tags == ["deploy", "ops"]


def test_json_store_writes_nothing_outside_its_directory(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = JsonDirStore(root)
    store.save(make_template("alpha"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert {p.name for p in root.iterdir()} <= {"alpha.json", "alpha.json.lock"}


def _start_together(commands: list[list[str]]) -> list[subprocess.Popen[str]]:
    """Start one Python child per ``[code, *args]``, wait until each says "ready", then say "go" to all.

    The children do their work at the same moment, so the test really races them.
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for command in commands
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


# --------------------------------------------------------------------------------- two processes

CHILD = textwrap.dedent(
    """
    import sys
    from kindling.templates import open_store, Template
    from kindling.mining.model import Example

    target, name, uses, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store = open_store(target)
    print("ready", flush=True)
    sys.stdin.readline()  # both processes start their loops together
    for i in range(uses):
        store.record_use(name)
        if i % 10 == 0:
            store.save(Template(name=name, description=f"{tag}-{i}",
                                examples=[Example(tool_name="t", result="x" * 20000)]))
    print("done", flush=True)
    """
)


def test_two_processes_lose_no_update(target: str, store: TemplateStore) -> None:
    store.save(make_template("shared"))
    uses = 60
    procs = _start_together([[CHILD, target, "shared", str(uses), tag] for tag in ("p1", "p2")])
    # Read all the while: a reader must never meet a half-written template.
    reads = 0
    while any(proc.poll() is None for proc in procs):
        assert store.get("shared").name == "shared"
        assert [t.name for t in store.list()] == ["shared"] and store.problems == []
        reads += 1
    assert reads > 0
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == "done"
    final = store.get("shared")
    assert final.usage_count == 2 * uses
    saves = 2 * len(range(0, uses, 10))
    assert store.versions("shared") == list(range(1, saves + 2))
    descriptions = {store.get("shared", v).description for v in store.versions("shared")}
    assert len(descriptions) == saves + 1  # every save is kept, none overwrote another
    if isinstance(store, JsonDirStore):
        leftovers = [p.name for p in store.root.rglob("*.tmp")]
        assert leftovers == []


FIRST_SAVE_CHILD = textwrap.dedent(
    """
    import sys
    from kindling.templates import open_store, Template

    target, tag = sys.argv[1], sys.argv[2]
    store = open_store(target)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(8):
        store.save(Template(name="fresh", description=f"{tag}-{i}"))
    print("done", flush=True)
    """
)


def test_two_processes_creating_one_new_name_keep_every_version(target: str, store: TemplateStore) -> None:
    procs = _start_together([[FIRST_SAVE_CHILD, target, tag] for tag in ("p1", "p2")])
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert out.strip() == "done"
    assert store.versions("fresh") == list(range(1, 17))
    descriptions = {store.get("fresh", v).description for v in range(1, 17)}
    assert descriptions == {f"{tag}-{i}" for tag in ("p1", "p2") for i in range(8)}


KILLED_CHILD = textwrap.dedent(
    """
    import os, sys, time
    import kindling.fileio
    from kindling.templates import open_store, Template
    from kindling.templates.store import SqlStore
    from kindling.mining.model import Example

    target = sys.argv[1]
    store = open_store(target)

    def stall(*args, **kwargs):
        print("writing", flush=True)
        time.sleep(60)

    if isinstance(store, SqlStore):
        original = SqlStore._save
        def slow_save(self, conn, template):
            stored = original(self, conn, template)
            stall()  # killed here: inside the transaction, before the commit
            return stored
        SqlStore._save = slow_save
    else:
        real_fsync = os.fsync
        def fsync(fd):
            # Killed while the new current file is a synced-to-be temp file, not yet renamed over
            # victim.json (the copy of version 1 into victim.versions/ was written before it).
            if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".victim.json."):
                stall()
            real_fsync(fd)
        kindling.fileio.os.fsync = fsync
    store.save(Template(name="victim", description="second",
                        examples=[Example(tool_name="t", result="y" * 50000)]))
    """
)


def test_write_killed_midway_leaves_previous_version_readable(target: str, store: TemplateStore) -> None:
    store.save(make_template("victim", description="first"))
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "writing", proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
        proc.wait(timeout=30)
    if isinstance(store, JsonDirStore):
        # The kill really came mid-write: the new file's temp copy is there, never renamed.
        assert list(store.root.glob(".victim.json.*.tmp"))
    current = store.get("victim")
    assert current.description == "first"
    assert current.version == 1
    assert store.versions("victim") == [1]
    assert [t.name for t in store.list()] == ["victim"]
    assert store.problems == []
    # The store is still writable after the crash.
    assert store.save(make_template("victim", description="third")).version == 2
