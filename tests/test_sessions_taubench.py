"""tau-bench / tau2-bench runs found by their shape: every shape real files use, the development data's
exact counts (shared/data/trajectories/SOURCES.md), the task each run really ran, and one clear error
for a JSON document of no known shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from kindling.cli.main import app
from kindling.errors import SourceError, UnknownFormatError
from kindling.mining import compute_stats
from kindling.sessions import ReadReport, Session, detect_format, iter_sessions

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories"
needs_data = pytest.mark.skipif(
    not (DATA / "SOURCES.md").is_file(), reason=f"development data not found at {DATA}"
)

# --------------------------------------------------------------------------------- small fixtures


def simulation(
    sim_id: str, task_id: str, *, reward: float = 1.0, action: str = "get_order_details"
) -> dict[str, Any]:
    """A tau2-bench simulation: one agent call (expected action ``action``), its result, a user call."""
    return {
        "id": sim_id,
        "task_id": task_id,
        "trial": 0,
        "start_time": "2025-07-31T10:00:00",
        "end_time": "2025-07-31T10:01:00Z",
        "termination_reason": "user_stop",
        "reward_info": {
            "reward": reward,
            "action_checks": [
                {
                    "action": {"action_id": "x_0", "name": action, "arguments": {"order_id": "#W1"}},
                    "action_match": True,
                }
            ],
        },
        "messages": [
            {"role": "assistant", "content": "Hi! How can I help?"},
            {"role": "user", "content": "Where is my order #W1?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "name": action, "arguments": {"order_id": "#W1"}, "requestor": "assistant"}
                ],
            },
            {
                "role": "tool",
                "id": "c1",
                "content": "Error: order not found",
                "requestor": "assistant",
                "error": True,
            },
            {
                "role": "user",
                "content": None,
                "tool_calls": [{"id": "u1", "name": "check", "arguments": {}, "requestor": "user"}],
            },
            {"role": "tool", "id": "u1", "content": "ok", "requestor": "user", "error": False},
        ],
    }


def task(task_id: str, action: str) -> dict[str, Any]:
    """A tau2-bench task expecting one call of ``action``."""
    return {
        "id": task_id,
        "user_scenario": {
            "instructions": {
                "domain": "retail",
                "reason_for_call": f"You want {action} for order #W1.",
                "known_info": "You are Ada Lovelace in zip 10001.",
                "unknown_info": "You do not remember your email.",
                "task_instructions": "Be brief.",
            }
        },
        "evaluation_criteria": {
            "actions": [
                {
                    "action_id": f"{task_id}_0",
                    "requestor": "assistant",
                    "name": action,
                    "arguments": {"order_id": "#W1"},
                }
            ]
        },
    }


def write(path: Path, value: Any, *, indent: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0))
    return path


def read(source: Path, fmt: str | None = None) -> tuple[list[Session], ReadReport]:
    report = ReadReport()
    return list(iter_sessions(source, fmt, report=report)), report


def counts(report: ReadReport) -> tuple[int, int, int, int]:
    return report.sessions, report.tool_calls, report.tool_results, report.user_tool_calls


def test_results_file_with_tasks(tmp_path: Path) -> None:
    document = {
        "timestamp": "t",
        "info": {"agent_info": {"llm": "gpt-x"}, "user_info": {}},
        "tasks": [task("0", "get_order_details"), task("1", "cancel_pending_order")],
        "simulations": [
            simulation("s0", "0"),
            simulation("s1", "1", reward=0.0, action="cancel_pending_order"),
        ],
    }
    path = write(tmp_path / "results.json", document)
    assert detect_format(path) == "tau2-bench"
    sessions, report = read(path)
    assert counts(report) == (2, 2, 2, 2) and not report.skipped
    first = sessions[0]
    assert (first.id, first.model, first.reward, first.end_reason) == ("s0", "gpt-x", 1.0, "user_stop")
    assert first.started_at == 1753956000.0 and first.ended_at == 1753956060.0  # no zone and "Z": both UTC
    assert first.metadata["task_id"] == "0" and first.metadata["task_match"] == "agrees"
    assert first.metadata["instruction"] == (
        "You want get_order_details for order #W1.\nYou are Ada Lovelace in zip 10001.\n"
        "You do not remember your email.\nBe brief."
    )
    assert first.metadata["expected_actions"] == [
        {"name": "get_order_details", "arguments": {"order_id": "#W1"}}
    ]
    assert [m.error for m in first.messages if m.role == "tool"] == [True, False]


def test_scrambled_labels_are_recovered_from_the_action_checks(tmp_path: Path) -> None:
    # Labels shifted by one, as in the ToolOrchestra file; tasks 2 and 3 are twins (same actions).
    tasks = [task("0", "a"), task("1", "b"), task("2", "c"), task("3", "c")]
    simulations = [
        simulation("s0", "1", action="a"),
        simulation("s1", "2", action="b"),
        simulation("s2", "0", action="c"),
        simulation("s3", "3", action="c"),
    ]
    path = write(tmp_path / "r.json", {"info": {}, "tasks": tasks, "simulations": simulations})
    sessions, _ = read(path)
    got = [
        (
            s.metadata["labelled_task_id"],
            s.metadata["task_id"],
            s.metadata["task_match"],
            s.metadata.get("task_candidates"),
        )
        for s in sessions
    ]
    assert got == [
        ("1", "0", "recovered", None),
        ("2", "1", "recovered", None),
        ("0", "2", "ambiguous", ["2", "3"]),
        ("3", "3", "agrees", ["2", "3"]),
    ]
    # The instruction is the task actually run, not the label's.
    assert "You want a " in sessions[0].metadata["instruction"]


def test_evaluation_wrapper_nests_simulations_under_task_results(tmp_path: Path) -> None:
    document = {
        "source": {"policy_path": "p"},
        "config": {"agent_llm": "claude-x", "task_ids": ["5", "6"]},
        "results": {"n_tasks": 2},
        "task_results": [
            {"task_id": "5", "success": True, "reward": 1.0, "trajectory": simulation("s5", "5")},
            {
                "task_id": "6",
                "success": False,
                "reward": 0.0,
                "trajectory": simulation("s6", "6", reward=0.0),
            },
            {"task_id": "7", "error": "crashed", "trajectory": None},
        ],
        "policy": "text",
    }
    path = write(tmp_path / "wrapper.json", document)
    assert detect_format(path) == "tau2-bench"
    sessions, report = read(path)
    assert counts(report) == (2, 2, 2, 2)
    assert report.skipped == {"malformed_record": 1}
    assert [(s.id, s.model, s.reward, s.metadata["task_id"]) for s in sessions] == [
        ("s5", "claude-x", 1.0, "5"),
        ("s6", "claude-x", 0.0, "6"),
    ]
    # No task list: the expected actions are the ones the run was checked against.
    assert sessions[0].metadata["expected_actions"] == [
        {"name": "get_order_details", "arguments": {"order_id": "#W1"}}
    ]
    assert sessions[0].metadata["task_match"] == "unchecked"


def single_file(task_id: str, *, empty: bool = False) -> dict[str, Any]:
    sim = simulation("ignored", task_id)
    return {
        "task_id": task_id,
        "task": task(task_id, "get_order_details"),
        "run_info": {
            "simulation_id": f"sim-{task_id}",
            "timestamp": "2026-02-26T09:27:56",
            "duration_sec": 0.0 if empty else 12.5,
            "termination_reason": "agent_error" if empty else "user_stop",
        },
        "reward_info": {"reward": 0.0, "action_checks": None} if empty else sim["reward_info"],
        "messages": [] if empty else sim["messages"],
    }


def test_folder_of_single_simulation_files_with_an_index(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    for number in (0, 2, 10):
        write(folder / f"task_{number}.json", single_file(str(number)))
    write(folder / "task_3.json", single_file("3", empty=True))
    write(folder / "index.json", {"run_timestamp": "t", "tasks": [{"task_id": "0", "reward": 1.0}]})
    (folder / "notes.txt").write_text("not read")
    assert detect_format(folder) == "tau2-bench"
    sessions, report = read(folder)
    assert [s.id for s in sessions] == ["sim-0", "sim-2", "sim-3", "sim-10"]  # natural order
    assert counts(report) == (4, 3, 3, 3)
    assert report.skipped == {"file_without_sessions": 1}  # index.json: counted once, not as lines
    empty = sessions[2]
    assert empty.messages == () and empty.end_reason == "agent_error" and empty.reward == 0.0
    assert sessions[0].ended_at == sessions[0].started_at + 12.5
    assert sessions[0].metadata["instruction"].startswith("You want get_order_details")
    # One file alone reads too.
    alone, _ = read(folder / "task_2.json")
    assert [s.id for s in alone] == ["sim-2"]


def test_folder_of_results_files_and_a_list_of_simulations(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    write(folder / "a.json", {"info": {}, "tasks": [], "simulations": [simulation("a1", "0")]})
    write(folder / "b.json", [simulation("b1", "1"), simulation("b2", "2")], indent=False)
    (folder / "c.json").write_bytes(b'{"simulations": [')  # cut short: counted, the rest still read
    sessions, report = read(folder)
    assert [s.id for s in sessions] == ["a1", "b1", "b2"]
    assert report.skipped == {"truncated_file": 1}


def tau_run(task_id: int, reward: float) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "trial": 0,
        "reward": reward,
        "info": {
            "task": {
                "user_id": "ada_1",
                "instruction": "You are Ada. Cancel order #W1.",
                "actions": [
                    {
                        "name": "cancel_pending_order",
                        "kwargs": {"order_id": "#W1", "reason": "no longer needed"},
                    }
                ],
            }
        },
        "traj": [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "Cancel #W1"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "t1", "type": "function", "function": {"name": "think", "arguments": "{}"}},
                    {
                        "id": "t2",
                        "type": "function",
                        "function": {"name": "cancel_pending_order", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "name": "think", "content": ""},
            {
                "role": "tool",
                "tool_call_id": "t2",
                "name": "cancel_pending_order",
                "content": "Error: not pending",
            },
        ],
    }


def test_tau_bench_v1_keeps_instruction_actions_and_error_results(tmp_path: Path) -> None:
    path = write(tmp_path / "v1.json", [tau_run(3, 1.0), tau_run(4, 0.0)])
    assert detect_format(path) == "tau-bench"
    sessions, report = read(path)
    assert counts(report) == (2, 4, 4, 0)
    first = sessions[0]
    assert (
        first.metadata["task_id"] == "3" and first.metadata["instruction"] == "You are Ada. Cancel order #W1."
    )
    assert first.metadata["expected_actions"] == [
        {"name": "cancel_pending_order", "arguments": {"order_id": "#W1", "reason": "no longer needed"}}
    ]
    # tau-bench has no error flag: a result starting with "Error" is the tool's exception.
    assert [m.error for m in first.messages if m.role == "tool"] == [False, True]
    folder = tmp_path / "v1-folder"
    write(folder / "run1.json", [tau_run(1, 1.0)])
    write(folder / "run2.json", [tau_run(2, 1.0)])
    assert detect_format(folder) == "tau-bench"
    assert [s.id for s in read(folder)[0]] == ["tau-bench:1:0", "tau-bench:2:0"]


@pytest.mark.parametrize("indent", [True, False])
def test_a_json_document_of_unknown_shape_is_one_clear_error(tmp_path: Path, indent: bool) -> None:
    path = write(
        tmp_path / "other.json", {"name": "x", "items": [{"a": i} for i in range(3000)]}, indent=indent
    )
    with pytest.raises(UnknownFormatError, match=r"unrecognised format|no known session keys") as caught:
        detect_format(path)
    assert "\n" not in str(caught.value)
    # Forced into a benchmark format it is not: the same, one error and no skipped lines.
    for fmt in ("tau-bench", "tau2-bench"):
        with pytest.raises(UnknownFormatError, match=f"as {fmt}: it is a JSON object with keys items, name"):
            iter_sessions(path, fmt)
    result = CliRunner().invoke(app, ["sessions", str(path)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and result.output.startswith("Error: ")


def test_a_folder_without_runs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"without session files"):
        detect_format(tmp_path)
    write(tmp_path / "index.json", {"tasks": []})
    with pytest.raises(UnknownFormatError, match=r"none of the files in it or its subfolders"):
        detect_format(tmp_path)


# ------------------------------------------------------------------------------ development data

# (path under the data folder, runs, successes, agent calls, agent results, error results,
#  simulated-user calls, skipped), as SOURCES.md gives them.
DEVELOPMENT_FILES = [
    ("tau2-bench-sierra/gpt-4.1_retail_defautl_gpt-4.1_1trials.json", 40, 34, 299, 299, 12, 0, {}),
    (
        "tau2-bench-sierra/ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm_retail_default_gpt-4.1_1trials.json",
        40, 34, 292, 292, 23, 0, {},
    ),
    ("tau2-bench-sierra/toolorchestra_retail_gpt-5_1trial.json", 114, 96, 873, 873, 14, 0, {}),
    ("tau2-bench-bogoliubon/llm_rollout_base-policy_gpt-5_train_1trial.json", 74, 62, 574, 574, 11, 0, {}),
    ("tau2-bench-bogoliubon/claude_sonnet_74train_trajectories.json", 74, 74, 579, 579, 9, 0, {}),
    (
        "tau-bench-avaljotsingh/tool-calling-none-0.1_range_0-100_user-none-llm_06232025.json",
        100, 73, 793, 793, 34, 0, {},
    ),
    ("tau2-bench-codesque16/_gemini-3-flash__base__all_", 114, 89, 866, 866, 31, 113, {"file_without_sessions": 1}),
]  # fmt: skip


@needs_data
@pytest.mark.parametrize(
    ("name", "runs", "successes", "calls", "results", "errors", "user_calls", "skipped"), DEVELOPMENT_FILES
)
def test_development_data_reads_with_the_documented_counts(
    name: str,
    runs: int,
    successes: int,
    calls: int,
    results: int,
    errors: int,
    user_calls: int,
    skipped: dict[str, int],
) -> None:
    sessions, report = read(DATA / name)
    assert (report.sessions, report.tool_calls, report.tool_results, report.user_tool_calls) == (
        runs, calls, results, user_calls,
    )  # fmt: skip
    assert dict(report.skipped) == skipped
    assert sum(1 for s in sessions if s.reward == 1.0) == successes
    error_results = [
        result
        for session in sessions
        for result in session.messages
        if result.role == "tool"
        and result.error
        and result.tool_call_id
        in {c.id for m in session.messages for c in m.tool_calls if c.requestor == "assistant"}
    ]
    assert len(error_results) == errors
    assert all(m.content and m.content.startswith("Error") for m in error_results)
    assert all(s.metadata["task_id"] is not None for s in sessions)
    # kindling's own outcome rules judge exactly those results failed, and stats counts the successes.
    stats = compute_stats(sessions).as_dict()
    assert (stats["results_failed"], stats["rewarded"], stats["successes"]) == (errors, runs, successes)
    # Expected actions are known for every run but those scored without action checks.
    assert sum(s.metadata["expected_actions"] is None for s in sessions) <= 2


@needs_data
def test_development_data_total_matches_the_summary() -> None:
    total = ReadReport()
    for name, *_ in DEVELOPMENT_FILES:
        list(iter_sessions(DATA / name, report=total))
    assert (total.sessions, total.tool_calls, total.tool_results) == (556, 4276, 4276)


@needs_data
def test_the_task_each_run_really_ran() -> None:
    # SOURCES.md, trap 1: only 1 of the ToolOrchestra file's labels is right; 104 runs match one
    # task exactly, 10 fit one of two twins (24/57, 41/42, 71/72, 83/84, 96/97).
    sessions, _ = read(DATA / "tau2-bench-sierra/toolorchestra_retail_gpt-5_1trial.json")
    matches = [s.metadata["task_match"] for s in sessions]
    assert (matches.count("agrees"), matches.count("recovered"), matches.count("ambiguous")) == (1, 103, 10)
    twins = {("24", "57"), ("41", "42"), ("71", "72"), ("83", "84"), ("96", "97")}
    for session in sessions:
        if session.metadata["task_match"] == "ambiguous":
            assert tuple(session.metadata["task_candidates"]) in twins
            assert session.metadata["task_id"] == session.metadata["task_candidates"][0]
    assert len({s.metadata["task_id"] for s in sessions if s.metadata["task_match"] != "ambiguous"}) == 104
    # Elsewhere the labels are right: every run's checks agree with its labelled task.
    for name in (
        "tau2-bench-sierra/gpt-4.1_retail_defautl_gpt-4.1_1trials.json",
        "tau2-bench-bogoliubon/llm_rollout_base-policy_gpt-5_train_1trial.json",
        "tau2-bench-codesque16/_gemini-3-flash__base__all_",
    ):
        for session in read(DATA / name)[0]:
            if session.metadata["task_match"] != "agrees":
                # Only the four codesque16 runs that failed before their first turn have no checks.
                assert session.messages == () and session.end_reason == "agent_error"
            assert session.metadata["task_id"] == session.metadata["labelled_task_id"]
            assert session.metadata["instruction"]
