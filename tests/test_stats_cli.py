"""``kindling stats`` on the generated sample database: JSON keys and numbers, the table, the PNG."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.sessions import generate_sample_db

INTERFACE_KEYS = [
    "sessions",
    "messages",
    "tool_calls",
    "results_paired",
    "results_failed",
    "calls_unanswered",
    "skipped",
    "tools",
    "task_types",
    "cohorts",
]


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_sample_db(tmp_path_factory.mktemp("sample") / "state.db", sessions=150, seed=3)


def _agent_calls_in_db(path: Path) -> tuple[int, int]:
    """Count sessions and assistant tool calls straight from SQL, independently of the reader."""
    with sqlite3.connect(path) as conn:
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
        calls = 0
        for (raw,) in conn.execute(
            "SELECT tool_calls FROM messages WHERE role = 'assistant' AND (active = 1 OR compacted = 1) "
            "AND tool_calls IS NOT NULL"
        ):
            calls += len(orjson.loads(raw))
    return sessions, calls


def test_stats_json_matches_the_database(sample_db: Path) -> None:
    result = CliRunner().invoke(app, ["stats", str(sample_db), "--json"])
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert [key for key in INTERFACE_KEYS if key not in data] == []
    sessions, calls = _agent_calls_in_db(sample_db)
    assert data["sessions"] == sessions
    assert data["tool_calls"] == calls
    assert data["results_paired"] + data["calls_unanswered"] == data["tool_calls"]
    assert 0 < data["results_failed"] < data["results_paired"]
    assert sum(t["calls"] for t in data["tools"].values()) == data["tool_calls"]
    assert sum(c["sessions"] for c in data["cohorts"].values()) == data["sessions"]
    assert sum(c["calls"] for c in data["cohorts"].values()) == data["tool_calls"]
    assert sum(data["task_types"].values()) == data["sessions"]
    for row in data["cohorts"].values():
        if row["failure_rate"] is not None:
            assert row["ci_low"] <= row["failure_rate"] <= row["ci_high"]
    # The sample is built so that marathon sessions fail less than mid-length ones.
    assert data["cohorts"]["marathon"]["failure_rate"] < data["cohorts"]["mid"]["failure_rate"]


def test_several_sources_are_read_as_one(sample_db: Path) -> None:
    once = orjson.loads(CliRunner().invoke(app, ["stats", str(sample_db), "--json"]).stdout)
    twice = orjson.loads(CliRunner().invoke(app, ["stats", str(sample_db), str(sample_db), "--json"]).stdout)
    assert twice["sessions"] == 2 * once["sessions"]
    assert twice["results_failed"] == 2 * once["results_failed"]


def test_stats_table_is_readable(sample_db: Path) -> None:
    result = CliRunner().invoke(
        app, ["stats", str(sample_db), "--by-tool", "--top", "3"], env={"COLUMNS": "160"}
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    for needle in (
        "Failure rate by session length",
        "marathon",
        ">= 100",
        "top 3 tools by calls",
        "95% CI below",
        "Task types",
    ):
        assert needle in out, needle
    assert "marathon vs mid:" in out


def test_by_tool_table_fits_an_80_column_terminal(sample_db: Path) -> None:
    data = orjson.loads(CliRunner().invoke(app, ["stats", str(sample_db), "--json"]).stdout)
    result = CliRunner().invoke(app, ["stats", str(sample_db), "--by-tool"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    # Rich shortens cells that do not fit with an ellipsis; every figure must be readable whole.
    assert "…" not in result.stdout
    top = next(iter(data["tools"]))
    # The per-tool table's row (the task-type table may have a row of the same name).
    lines = [line for line in result.stdout.splitlines() if f" {top} " in line and "%" in line]
    assert len(lines) == 1 and f"{data['tools'][top]['calls']:,}" in lines[0]
    for cohort in data["cohorts"].values():
        row = cohort["tools"][top]
        assert f"{row['ci_low'] * 100:.1f}–{row['ci_high'] * 100:.1f}%" in result.stdout


def test_stats_plot_writes_a_png_that_opens(sample_db: Path, tmp_path: Path) -> None:
    import matplotlib.image

    for by_tool, name in ((False, "cohorts.png"), (True, "by_tool.png")):
        target = tmp_path / "plots" / name
        args = ["stats", str(sample_db), "--plot", str(target), "--json"] + (["--by-tool"] if by_tool else [])
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert orjson.loads(result.stdout)["plot"] == str(target)
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = matplotlib.image.imread(target)
        # Per tool, the figure widens with the number of tools so every group stays legible.
        assert pixels.shape[0] == 500 and (pixels.shape[1] > 900 if by_tool else pixels.shape[1] == 900)
        # Not a blank canvas: bars and text put several colours on it.
        assert len({tuple(p) for p in pixels.reshape(-1, pixels.shape[2])[::97]}) > 5
    # Atomic writes leave no temporary files behind.
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["by_tool.png", "cohorts.png"]


def test_missing_source_is_one_clear_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["stats", str(tmp_path / "nope.db")])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1


def test_default_source_is_hermes_state_db(isolated_homes: Path) -> None:
    generate_sample_db(isolated_homes / "hermes" / "state.db", sessions=20, seed=1)
    data = orjson.loads(CliRunner().invoke(app, ["stats", "--json"]).stdout)
    assert data["sessions"] == 20


def test_bad_mining_config_is_reported(sample_db: Path, isolated_homes: Path) -> None:
    config = isolated_homes / "kindling" / "mining.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('{"outcome_rules": [{"name": "x", "kind": "text"}]}')
    result = CliRunner().invoke(app, ["stats", str(sample_db)])
    assert result.exit_code == 1
    assert "mining.json" in result.stderr and "pattern" in result.stderr


def test_help_explains_the_command() -> None:
    result = CliRunner().invoke(app, ["stats", "--help"])
    assert result.exit_code == 0
    assert "Wilson" in result.stdout and "--by-tool" in result.stdout and "--plot" in result.stdout


def _copy_to_postgres(sqlite_path: Path, url: str) -> None:
    """Copy the sample's sessions and messages tables into PostgreSQL, as Hermes on PostgreSQL has them."""
    import psycopg

    types = {"TEXT": "TEXT", "INTEGER": "BIGINT", "REAL": "DOUBLE PRECISION"}
    with sqlite3.connect(sqlite_path) as source, psycopg.connect(url) as target:
        for table in ("sessions", "messages"):
            columns = [
                (row[1], types.get(str(row[2]).upper(), "TEXT"))
                for row in source.execute(f"PRAGMA table_info({table})")
            ]
            target.execute(f"CREATE TABLE {table} ({', '.join(f'{name} {kind}' for name, kind in columns)})")
            names = ", ".join(name for name, _ in columns)
            with target.cursor().copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in source.execute(f"SELECT {names} FROM {table}"):
                    # PostgreSQL text cannot hold NUL: the sample's few multimodal "\x00json:" contents
                    # lose their marker, which changes no count compared below.
                    copy.write_row([v.replace("\x00", "") if isinstance(v, str) else v for v in row])


@pytest.mark.postgres
def test_stats_on_postgresql_matches_sqlite(sample_db: Path, pg_url: str) -> None:
    _copy_to_postgres(sample_db, pg_url)
    from_sqlite = orjson.loads(CliRunner().invoke(app, ["stats", str(sample_db), "--json"]).stdout)
    result = CliRunner().invoke(app, ["stats", pg_url, "--json"])
    assert result.exit_code == 0, result.output
    from_pg = orjson.loads(result.stdout)
    assert from_pg["sessions"] == from_sqlite["sessions"] > 0
    for key in (
        "messages",
        "tool_calls",
        "results_paired",
        "results_failed",
        "tools",
        "cohorts",
        "task_types",
    ):
        assert from_pg[key] == from_sqlite[key], key


def test_stats_on_tau2_uses_error_flags_and_ignores_the_simulated_users_calls(tmp_path: Path) -> None:
    def tool(call_id: str, content: str, error: bool, requestor: str = "assistant") -> dict[str, object]:
        return {"role": "tool", "id": call_id, "content": content, "requestor": requestor, "error": error}

    messages = [
        {"role": "assistant", "content": "Hi! How can I help?"},
        {
            "role": "user",
            "content": "No signal. Toggling airplane mode.",
            "tool_calls": [
                {"id": "u1", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}
            ],
        },
        tool("u1", "Airplane mode is now OFF", False, "user"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a1", "name": "get_customer", "arguments": {"phone": "1"}, "requestor": "assistant"},
                {"id": "a2", "name": "get_usage", "arguments": {"line": "L1"}, "requestor": "assistant"},
            ],
        },
        # Answered out of order; a2's text looks harmless but the source flags it as an error.
        tool("a2", "Line not found", True),
        tool("a1", '{"customer_id": "C1", "note": "error-free"}', False),
        {"role": "assistant", "content": "Done."},
    ]
    document = {
        "info": {"agent_info": {"llm": "m"}, "user_info": {"llm": "m"}},
        "tasks": [{"id": "t1"}],
        "simulations": [
            {"id": "sim-1", "task_id": "t1", "trial": 0, "reward_info": {"reward": 1.0}, "messages": messages}
        ],
    }
    path = tmp_path / "tau2.json"
    path.write_bytes(orjson.dumps(document))
    result = CliRunner().invoke(app, ["stats", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert (data["sessions"], data["tool_calls"], data["results_paired"], data["results_failed"]) == (
        1,
        2,
        2,
        1,
    )
    assert data["tools"]["get_usage"]["failures"] == 1 and data["tools"]["get_customer"]["failures"] == 0
    assert "toggle_airplane_mode" not in data["tools"]
    assert data["skipped"]["user_tool_call"] == 1


def test_stats_plot_format_follows_the_extension(sample_db: Path, tmp_path: Path) -> None:
    for name, magic in (("f.svg", b"<svg"), ("f.pdf", b"%PDF"), ("F.PNG", b"\x89PNG")):
        target = tmp_path / name
        result = CliRunner().invoke(app, ["stats", str(sample_db), "--plot", str(target), "--json"])
        assert result.exit_code == 0, result.output
        head = target.read_bytes()[:400]
        assert magic in head, (name, head[:40])


def test_stats_plot_unknown_extension_fails_before_reading(tmp_path: Path) -> None:
    # The source does not exist either: the plot name is checked first, so that is the error shown.
    result = CliRunner().invoke(app, ["stats", str(tmp_path / "nope.db"), "--plot", str(tmp_path / "x.jpg")])
    assert result.exit_code != 0
    assert "x.jpg" in result.stderr and ".svg" in result.stderr and "nope.db" not in result.stderr
    assert not (tmp_path / "x.jpg").exists()


def test_plot_labels_stay_inside_the_axes() -> None:
    from kindling.mining.plot import draw_failure_rates
    from kindling.mining.stats import COHORTS

    def row(failures: int, results: int, low: float, high: float) -> dict[str, object]:
        return {
            "failure_rate": failures / results,
            "failures": failures,
            "results": results,
            "ci_low": low,
            "ci_high": high,
            "sessions": 5,
            "tools": {},
        }

    # The tallest bar reaches 100%: its label used to run into the top of the axes.
    rows = [row(1, 10, 0.02, 0.4), row(9, 10, 0.6, 1.0), row(5, 10, 0.24, 0.76)]
    stats = {"cohorts": {name: r for (name, _lo, _hi), r in zip(COHORTS, rows, strict=True)}, "tools": {}}
    figure = draw_failure_rates(stats)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    box = axes.get_window_extent(renderer)
    labels = [t for t in axes.texts if "/" in t.get_text()]
    assert len(labels) == 3
    for label in labels:
        extent = label.get_window_extent(renderer)
        assert extent.y1 <= box.y1, (label.get_text(), extent.y1, box.y1)


def test_stats_reports_task_success_beside_tool_failure_at_80_columns(tmp_path: Path) -> None:
    def simulation(sim_id: str, reward: float, error: bool) -> dict[str, object]:
        return {
            "id": sim_id,
            "task_id": "0",
            "reward_info": {"reward": reward},
            "messages": [
                {"role": "user", "content": "Cancel my order"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "a", "name": "cancel", "arguments": {}, "requestor": "assistant"}],
                },
                {"role": "tool", "id": "a", "content": "Error: no" if error else "ok", "error": error},
            ],
        }

    path = tmp_path / "tau2.json"
    sims = [simulation("s1", 1.0, False), simulation("s2", 0.0, True), simulation("s3", 1.0, True)]
    path.write_bytes(orjson.dumps({"info": {}, "tasks": [], "simulations": sims}))
    data = orjson.loads(CliRunner().invoke(app, ["stats", str(path), "--json"]).stdout)
    assert (data["rewarded"], data["successes"]) == (3, 2)
    short = data["cohorts"]["short"]
    assert (short["rewarded"], short["successes"], short["success_rate"]) == (3, 2, round(2 / 3, 6))
    assert short["failure_rate"] == round(2 / 3, 6)
    result = CliRunner().invoke(app, ["stats", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "Task success beside tool failure" in result.output
    assert "tasks succeeded (reward 1)" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80
    success_table = result.output.split("Task success beside tool failure")[1]
    row = next(line for line in success_table.splitlines() if "short" in line)
    # rewarded, succeeded, success, its interval, and the cohort's tool failure rate beside it
    assert row.split("│")[2:7] == ["        3 ", "         2 ", "   66.7% ", " 20.8–93.9% ", "        66.7% "]


def test_stats_without_rewards_prints_no_success_table(sample_db: Path) -> None:
    result = CliRunner().invoke(app, ["stats", str(sample_db)], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert "Task success" not in result.output and "reward" not in result.output


def test_by_tool_plot_draws_every_tool_the_table_lists(sample_db: Path, tmp_path: Path) -> None:
    """The plot drew the 8 most-called tools where the table listed 11."""
    from kindling.mining.plot import draw_failure_rates

    data = orjson.loads(CliRunner().invoke(app, ["stats", str(sample_db), "--json"]).stdout)
    table = CliRunner().invoke(app, ["stats", str(sample_db), "--by-tool"], env={"COLUMNS": "200"}).stdout
    listed = [t for t in data["tools"] if re.search(rf"^[\s│┃]*{re.escape(t)}\s", table, re.MULTILINE)]
    assert len(listed) == len(data["tools"]) > 8
    figure = draw_failure_rates(data, by_tool=True, top=15)
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == listed
    assert len(axes.patches) == 3 * len(listed)  # one bar per cohort for each tool
    target = tmp_path / "tools.png"
    result = CliRunner().invoke(
        app, ["stats", str(sample_db), "--by-tool", "--plot", str(target), "--top", "5"]
    )
    assert result.exit_code == 0 and target.read_bytes()[:4] == b"\x89PNG"
    assert len(draw_failure_rates(data, by_tool=True, top=5).axes[0].get_xticklabels()) == 5
