"""engine=openai and engine=chat: one real vLLM server on 127.0.0.1 gives the in-process engine's
greedy outputs (token ids to /v1/completions; chats to /v1/chat/completions, ETAPP's agent and
judge); retries and failure rows against a small local HTTP server.

Both engines serve the tiny seeded model: the test is about the request path (token ids, the
structured-output field, sampling fields, reading the answer back), and equality of greedy
outputs holds for noise as it does for a trained model, at a tenth of the start-up."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import polars as pl
import pytest

from inference.engines import Request
from inference.engines.openai_server import OpenAIEngine, ServerUnreachable, _call
from inference.errors import EngineError
from tests.conftest import GPU_SHARE, tiny_args
from tests.inference.test_end_to_end import run_toolsweep

KEY = secrets.token_urlsafe(24)
"""The server's API key: a fresh secret per test session, so finding it in a run dir means it leaked."""
JUDGE_KEY = secrets.token_urlsafe(24)
"""The judge server's key: a request of the agent's sent there (or the judge's to the agent's) is refused."""
CHAT_KEY_ENV = "TOOLSWEEP_TEST_CHAT_KEY"
JUDGE_KEY_ENV = "TOOLSWEEP_TEST_JUDGE_KEY"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _serve(model: Path, key: str, structured: dict, log: Path, env: dict[str, str]) -> Iterator[str]:
    """`vllm serve` (its module entry point: the CPU wheel's `vllm` script cannot find its own
    version) with `model`, float32, this structured-output config, this API key, Hermes tool calls
    for the chat path; yields its /v1 URL, stopped after."""
    port = _free_port()
    env = {"VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}", **env}
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--kv-cache-memory-bytes", str(2**26),
               "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager", "--seed", "0",
               "--structured-outputs-config", json.dumps(structured), "--api-key", key,
               "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
               *(["--gpu-memory-utilization", GPU_SHARE["TOOLSWEEP_GPU_MEMORY_UTILIZATION"]] if GPU_SHARE else [])]
    with open(log, "wb") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 900
        while time.time() < deadline:
            assert server.poll() is None, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("vllm server did not become healthy in 900 s")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)



@pytest.fixture(scope="module")
def vllm_server(tiny_model, scratch_env, tmp_path_factory):
    """The tiny model behind an outlines server (the backend toolsweep's default constraint names)."""
    with _serve(tiny_model, KEY, {"backend": "outlines"}, tmp_path_factory.mktemp("server") / "server.log",
                scratch_env) as url:
        yield url


@pytest.fixture(scope="module")
def judge_model(tmp_path_factory, embedded_model) -> Path:
    """A second tiny model (another seed): the judge of the two-server run, its answers not the agent's."""
    from inference.models import prepare_tiny_model

    return prepare_tiny_model(tmp_path_factory.mktemp("judge_model") / "tiny-judge", seed=1)


@pytest.fixture(scope="module")
def judge_server(judge_model, scratch_env, tmp_path_factory):
    """The second model behind a server of its own (its own port and key) whose xgrammar backend
    forces tool calls; no free whitespace in constrained JSON, so that the tiny model's noise, held
    to a schema, ends within a short answer."""
    with _serve(judge_model, JUDGE_KEY, {"backend": "xgrammar", "disable_any_whitespace": True},
                tmp_path_factory.mktemp("judge_server") / "server.log", scratch_env) as url:
        yield url


def _served(base_url: str) -> dict[str, float]:
    """What the server has answered so far (its Prometheus counters): finished requests and prompt tokens."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    totals = {"requests": 0.0, "prompt_tokens": 0.0}
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name == "vllm:request_success_total":
            totals["requests"] += float(line.rsplit(" ", 1)[1])
        elif name == "vllm:prompt_tokens_total":
            totals["prompt_tokens"] += float(line.rsplit(" ", 1)[1])
    return totals


@pytest.mark.vllm
def test_server_engine_outputs_equal_the_in_process_engine(tmp_path, vllm_server, tiny_model, scratch_env):
    """The server's greedy outputs are the in-process engine's (which runs quiet: no bar drawn, and
    its batches still run whole)."""
    common = [*tiny_args(tiny_model, vllm=False), "dataset.limit=1", "model.dtype=float32", "engine.cache=false"]
    # eager like the server: on a GPU compiled graphs may flip a near-tied greedy token of a random model
    local = run_toolsweep(tmp_path / "local", [*common, "engine.cpu_kvcache_gib=0.0625", "engine.enforce_eager=true",
                                               "quiet=true"], env=scratch_env)
    assert local.returncode == 0, local.stderr[-3000:]
    # quiet hides vLLM's bar without disabling it: vLLM divides by a bar's elapsed time, a disabled
    # bar's is 0, and every batch then failed into one-request-at-a-time retries
    assert "batch failed" not in local.stderr and "\r" not in local.stderr, local.stderr[-2000:]
    remote = run_toolsweep(tmp_path / "remote", [*common, "engine=openai", f"engine.base_url={vllm_server}",
                                                 "engine.revision=tiny-test"],
                           env={**scratch_env, "OPENAI_API_KEY": KEY})
    assert remote.returncode == 0, remote.stderr[-3000:]
    columns = ["sample_id", "output", "finish_reason", "output_tokens", "official_call_ok"]
    assert pl.read_parquet(tmp_path / "remote" / "samples.parquet").select(columns).equals(
        pl.read_parquet(tmp_path / "local" / "samples.parquet").select(columns))
    facts = json.loads((tmp_path / "remote" / "run.json").read_text())
    assert facts["engine"] == "openai" and facts["backend"] == "outlines (server)"
    assert KEY not in (tmp_path / "remote" / "run.json").read_text(), "the key never reaches the run facts"


class _Flaky(BaseHTTPRequestHandler):
    """Answers /v1/models; /v1/completions fails with 503 `fail` times, then answers."""

    fail = 0
    seen: list[dict] = []

    def log_message(self, *args):  # keep the test output clean
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send(200, {"data": [{"id": "m", "root": "/models/m", "max_model_len": 4096}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if type(self).fail > 0:
            type(self).fail -= 1
            return self._send(503, {"error": "busy"})
        self._send(200, {"choices": [{"text": "ok", "finish_reason": "stop", "token_ids": [1, 2]}]})


@pytest.fixture
def flaky_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Flaky.fail, _Flaky.seen = 0, []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _engine(base_url: str, retries: int = 3) -> OpenAIEngine:
    return OpenAIEngine(base_url=base_url, api_key=None, model=None, constraint="outlines", max_new_tokens=8,
                        temperature=0.0, seed=0, concurrency=2, timeout_s=10, retries=retries)


def test_5xx_is_retried_and_a_request_that_keeps_failing_is_a_row(flaky_server, monkeypatch):
    import inference.engines.openai_server as module

    monkeypatch.setattr(module, "_BACKOFF_S", 0.01)
    _Flaky.fail = 2
    engine = _engine(flaky_server)
    good = Request("p-1", "", (1, 2, 3), None)
    [ok] = engine.generate([good])
    assert (ok.output, ok.finish_reason, ok.output_tokens) == ("ok", "stop", 2)
    assert len(_Flaky.seen) == 3, "two 503s, then the answer"
    assert _Flaky.seen[-1]["prompt"] == [1, 2, 3] and _Flaky.seen[-1]["temperature"] == 0.0
    _Flaky.fail = 10
    [busy] = _engine(flaky_server, retries=1).generate([good])
    assert busy.finish_reason == "error" and "did not answer after 2 tries" in busy.error


def test_a_server_that_is_not_there_is_a_clear_error():
    with pytest.raises(ServerUnreachable, match="did not answer after 1 tries"):
        _call(f"http://127.0.0.1:{_free_port()}/v1", "/models", None, None, 2, 0)


def test_unknown_model_names_the_served_ones(flaky_server):
    with pytest.raises(EngineError, match=r"engine.model must name one of the server's models \['m'\]"):
        OpenAIEngine(base_url=flaky_server, api_key=None, model="other", constraint="none", max_new_tokens=8,
                     temperature=0.0, seed=0, concurrency=1, timeout_s=5, retries=0)


@pytest.mark.vllm
@pytest.mark.shared_data
def test_etapp_judge_behind_the_server_scores_as_the_in_process_judge(tmp_path, vllm_server, tiny_model, scratch_env,
                                                                      etapp_data):
    """The judge is a role like any model: `engine@roles.judge.engine=openai` against the real
    `vllm serve` gives the in-process judge's greedy answers and scores (scripted agent, so the
    judge's prompts are the same in both runs). Free decoding, upstream's protocol, 48 tokens: the
    server's structured outputs are the single-call test's subject, and an outlines compile of the
    judge's schema in both runs cost most of this test."""
    from tests.inference.test_etapp_run import one_case

    sid = "tool_given/fc/James_Harrington-1"
    script = tmp_path / "agent.jsonl"
    script.write_text(json.dumps({"sample_id": sid, "turn": 0, "answer": "Mild and dry in San Francisco today."}) + "\n")
    common = ["dataset=etapp", f"dataset.path={etapp_data}", *one_case("James_Harrington", 1)[:-1], "engine=script",
              f"engine.script={script}", f"roles.judge.model.path={tiny_model}", "roles.judge.model.embedded=false",
              "roles.judge.model.dtype=float32", "roles.judge.decoding.constraint=none",
              "roles.judge.decoding.max_new_tokens=48", "dataset.judge_retries=0",
              "roles.judge.engine.cache=false"]
    local = run_toolsweep(tmp_path / "local", [*common, "roles.judge.engine.cpu_kvcache_gib=0.0625"], env=scratch_env)
    assert local.returncode == 0, local.stderr[-3000:]
    remote = run_toolsweep(tmp_path / "remote", [*common, "engine@roles.judge.engine=openai",
                                                 f"roles.judge.engine.base_url={vllm_server}",
                                                 "roles.judge.engine.revision=tiny-test"],
                           env={**scratch_env, "OPENAI_API_KEY": KEY})
    assert remote.returncode == 0, remote.stderr[-3000:]
    columns = ["sample_id", "judge_output", "judge_attempts", "judge_error", "judge_procedure",
               "judge_personalization", "judge_proactivity", "judge_keypoints"]
    local_rows = pl.read_parquet(tmp_path / "local" / "judgements.parquet").select(columns)
    assert local_rows["judge_output"].null_count() == 0, "the judge answered"
    assert pl.read_parquet(tmp_path / "remote" / "judgements.parquet").select(columns).equals(local_rows)
    scores = ["sample_id", "judge_procedure_score", "judge_personalization_score", "judge_proactivity_score"]
    assert pl.read_parquet(tmp_path / "remote" / "samples.parquet").select(scores).equals(
        pl.read_parquet(tmp_path / "local" / "samples.parquet").select(scores))
    facts = json.loads((tmp_path / "remote" / "run.json").read_text())
    assert facts["roles"]["judge"]["engine"] == "openai" and KEY not in json.dumps(facts)


# engine=chat, as the ETAPP paper runs it: the agent (fc and react, free decoding as upstream) on one
# server, the judge on another (a second model, its own port and key), both through
# /v1/chat/completions, against the same two models in-process. One user, one instruction, two
# turns, short answers; the judge decodes freely (upstream's protocol). The agent's chat engine
# renders locally too (its chats adapted to the tiny template: the tool block in the system turn),
# the judge's is remote-only (engine.local_template=false: its counts are the server's usage).
ETAPP_SLICE = ["dataset=etapp", "dataset.users=[James_Harrington]", "dataset.instructions=[1]",
               "dataset.methods=[fc,react]", "dataset.settings=[tool_given]", "dataset.max_turns=2",
               "decoding.max_new_tokens=24", "model=local", "model.dtype=float32", "engine.cache=false",
               "roles.judge.model.embedded=false", "roles.judge.model.dtype=float32",
               "roles.judge.decoding.constraint=none", "roles.judge.decoding.max_new_tokens=48",
               "dataset.judge_retries=0", "roles.judge.engine.cache=false"]


def _chat_overrides(agent_server: str, judge_server: str) -> list[str]:
    return ["engine=chat", f"engine.base_url={agent_server}", f"engine.api_key_env={CHAT_KEY_ENV}",
            "engine@roles.judge.engine=chat", f"roles.judge.engine.base_url={judge_server}",
            f"roles.judge.engine.api_key_env={JUDGE_KEY_ENV}", "roles.judge.engine.local_template=false"]


@pytest.fixture(scope="module")
def etapp_chat_runs(tmp_path_factory, vllm_server, judge_server, tiny_model, judge_model, scratch_env,
                    etapp_data) -> tuple[Path, Path, dict[str, dict[str, float]]]:
    """(the in-process run dir, the chat-engine run dir, what each server answered during the chat
    run: {"agent": ..., "judge": ...}) of one ETAPP slice."""
    root = tmp_path_factory.mktemp("etapp_chat")
    common = [*ETAPP_SLICE, f"dataset.path={etapp_data}", f"model.path={tiny_model}",
              f"roles.judge.model.path={judge_model}"]
    local = run_toolsweep(root / "local", [*common, "engine.cpu_kvcache_gib=0.0625",
                                           "roles.judge.engine.cpu_kvcache_gib=0.0625"], env=scratch_env)
    assert local.returncode == 0, local.stderr[-3000:]
    env = {k: v for k, v in scratch_env.items() if k != "OPENAI_API_KEY"}
    servers = {"agent": vllm_server, "judge": judge_server}
    before = {role: _served(url) for role, url in servers.items()}
    remote = run_toolsweep(root / "remote", [*common, *_chat_overrides(vllm_server, judge_server)],
                           env={**env, CHAT_KEY_ENV: KEY, JUDGE_KEY_ENV: JUDGE_KEY})
    assert remote.returncode == 0, remote.stderr[-3000:]
    after = {role: _served(url) for role, url in servers.items()}
    answered = {role: {k: after[role][k] - before[role][k] for k in after[role]} for role in servers}
    return root / "local", root / "remote", answered


@pytest.mark.vllm
@pytest.mark.shared_data
def test_chat_engine_runs_etapp_agent_and_judge_on_two_servers_as_the_in_process_engine(etapp_chat_runs):
    """Same trajectories (fc and react), same judge answers and scores, same token counts (the
    server's `usage` for the remote-only judge equals the local count), each role's requests
    answered by its own server only, and the keys written nowhere."""
    local, remote, answered = etapp_chat_runs
    steps = ["sample_id", "index", "turn", "role", "content", "tool_calls", "finish_reason", "prompt_tokens",
             "output_tokens"]
    trajectories = pl.read_parquet(local / "trajectories.parquet").sort("sample_id", "index").select(steps)
    assert set(trajectories["sample_id"]) == {"tool_given/fc/James_Harrington-1", "tool_given/react/James_Harrington-1"}
    assert trajectories.filter(pl.col("role") == "assistant").height >= 2, "the agent answered"
    assert pl.read_parquet(remote / "trajectories.parquet").sort("sample_id", "index").select(steps).equals(trajectories)
    judged = ["sample_id", "judge_output", "judge_error", "judge_output_tokens", "judge_procedure",
              "judge_personalization", "judge_proactivity"]
    local_judged = pl.read_parquet(local / "judgements.parquet").sort("sample_id")
    remote_judged = pl.read_parquet(remote / "judgements.parquet").sort("sample_id")
    assert local_judged["judge_output"].null_count() == 0, "the judge answered"
    assert remote_judged.select(judged).equals(local_judged.select(judged))
    # remote-only: nothing is tokenized here; the server's usage counts the prompt as the local run did
    assert remote_judged["judge_prompt_tokens"].to_list() == local_judged["judge_prompt_tokens"].to_list()
    facts = {run: json.loads((run / "run.json").read_text()) for run in (local, remote)}
    for role in ("model", "judge"):
        assert facts[remote]["roles"][role]["engine"] == "chat"
        for count in ("prompt_tokens", "output_tokens"):
            assert facts[remote]["roles"][role][count] == facts[local]["roles"][role][count] > 0, (role, count)
    # Each role reached only its server: the agent's server answered the agent's model calls and
    # counted its prompt tokens, the judge's server the judge's (the two keys differ, so a request
    # sent to the other server would have been refused, an error row the equalities above exclude).
    agent_calls = pl.read_parquet(remote / "samples.parquet")["model_calls"].sum()
    assert answered["agent"] == {"requests": agent_calls, "prompt_tokens": facts[remote]["roles"]["model"]["prompt_tokens"]}
    assert answered["judge"] == {"requests": remote_judged["judge_attempts"].sum(),
                                 "prompt_tokens": facts[remote]["roles"]["judge"]["prompt_tokens"]}
    # The API keys: each server refuses requests without its key, so the chat run used both; no file
    # under its run dir (config dumps, .hydra/, run.json, run.log, parts, tables) holds either. (One
    # test with the equality above, so the two runs are made once: xdist gives each test its own worker.)
    files = [p for p in remote.rglob("*") if p.is_file()]
    assert {".hydra", "parts"} <= {p.parent.name for p in files} and any(p.name == "run.json" for p in files)
    assert [str(p.relative_to(remote)) for p in files
            if KEY.encode() in p.read_bytes() or JUDGE_KEY.encode() in p.read_bytes()] == []


def _chat_engine(base_url: str, constraint: str = "none", model: str | None = None, retries: int = 0,
                 local_template: bool = True, key: str = KEY, max_new_tokens: int = 48) -> "ChatEngine":
    from inference.engines.openai_chat import ChatEngine

    return ChatEngine(base_url=base_url, api_key=key, model=model, constraint=constraint, max_new_tokens=max_new_tokens,
                      temperature=0.0, seed=0, concurrency=2, timeout_s=60, retries=retries,
                      local_template=local_template)


def _chat(content: str, tools: list | None = None) -> str:
    return json.dumps({"messages": [{"role": "user", "content": content}], "tools": tools})


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Today's weather.",
    "parameters": {"type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["unit"], "additionalProperties": False}}}]


@pytest.mark.vllm
def test_a_json_schema_reaches_the_server_and_native_calls_come_back_as_hermes_text(vllm_server):
    """A JSON-schema answer is held to its schema by the server (response_format). A native call
    the server parsed (its tool_calls) is written as the Hermes block the callers read, recorded as
    native: the block is forced with vLLM's own regex field (the tiny model's noise calls nothing by
    itself; this server's outlines backend cannot force tool_choice=required: the next test)."""
    from inference.benchmarks.etapp.fc_reading import read_hermes

    schema = json.dumps({"type": "object", "properties": {"score": {"enum": [1, 2, 3]}}, "required": ["score"],
                         "additionalProperties": False})
    engine = _chat_engine(vllm_server, "outlines")
    [judged] = engine.generate([Request("j", "", (), schema, chat_json=_chat("Score it."))])
    assert judged.finish_reason == "stop" and json.loads(judged.output)["score"] in (1, 2, 3), judged
    assert judged.prompt_tokens > 0 and judged.output_tokens > 0 and judged.native_calls is None
    block = '<tool_call>\n{"name": "get_weather", "arguments": {"unit": "celsius"}}\n</tool_call>'
    body = {"messages": [{"role": "user", "content": "Weather?"}], "tools": WEATHER, "max_tokens": 120,
            "temperature": 0.0, "structured_outputs": {"regex": block.replace("{", r"\{").replace("}", r"\}")}}
    answer = _call(vllm_server, "/chat/completions", body, KEY, 60, 0)
    assert answer["choices"][0]["message"]["tool_calls"], "the server read the block as its own tool call"
    called = engine._read(Request("c", "", (), None, chat_json=_chat("Weather?", WEATHER)), answer)
    assert (called.output, called.finish_reason) == (block, "stop"), "the model's own text, written back"
    assert read_hermes(called.output) == ("", [{"name": "get_weather", "arguments": {"unit": "celsius"}}])
    assert json.loads(called.native_calls) == [{"name": "get_weather", "arguments": {"unit": "celsius"}}]


@pytest.mark.vllm
def test_a_constrained_native_call_is_forced_by_a_server_whose_backend_accepts_it(judge_server, judge_model,
                                                                                  vllm_server):
    """prompt.format=native under a constraint: `tool_choice: "required"` with strict tools. A server
    whose backend forces calls (xgrammar) answers one call of an offered tool, its arguments held to
    the tool's schema (the tiny model's noise, so only the constraint can have made it valid); the
    outlines server fails the request, and the error row names the server option that fixes it."""
    from transformers import AutoTokenizer

    schema = json.dumps(WEATHER[0]["function"]["parameters"])
    request = Request("n", "", (), schema, call_format="hermes", max_calls=1, chat_json=_chat("Weather?", WEATHER))
    engine = _chat_engine(judge_server, "xgrammar", key=JUDGE_KEY, max_new_tokens=64)
    body = engine._body(request)
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    assert [t["function"]["strict"] for t in body["tools"]] == [True], "arguments pinned to the tool's schema"
    # JSON allows whitespace between any two tokens, and noise, offered it, picks whitespace for ever:
    # whitespace-only tokens are biased away, so the answer ends; which call it is stays the constraint's
    vocab = AutoTokenizer.from_pretrained(judge_model)
    blank = {i: -100 for i in range(len(vocab)) if vocab.decode([i]) and not vocab.decode([i]).strip()}
    forced = engine._read(request, _call(judge_server, "/chat/completions", {**body, "logit_bias": blank},
                                         JUDGE_KEY, 60, 0))
    assert forced.finish_reason == "stop" and forced.error is None, forced
    [call] = json.loads(forced.native_calls)
    assert call["name"] == "get_weather" and call["arguments"]["unit"] in ("celsius", "fahrenheit"), call
    assert forced.output.startswith("<tool_call>\n") and forced.output.endswith("</tool_call>"), forced.output
    [refused] = _chat_engine(vllm_server, "outlines").generate([request])
    assert refused.finish_reason == "error" and "--structured-outputs-config" in refused.error, refused
    assert "xgrammar" in refused.error and KEY not in refused.error


@pytest.mark.vllm
def test_a_failing_chat_request_is_an_error_row_without_the_key(vllm_server):
    """A model the server does not serve (its 404), a server that is not there, a ReAct grammar:
    each an engine_error row, never an exception, and no message holds the key."""
    request = Request("p-1", "", (), None, chat_json=_chat("Hello"))
    [unknown] = _chat_engine(vllm_server, model="no-such-model").generate([request])
    [gone] = _chat_engine(f"http://127.0.0.1:{_free_port()}/v1").generate([request])
    [regex] = _chat_engine(vllm_server, "xgrammar").generate([Request("p-2", "", (), None, regex="Thought: .*",
                                                                      chat_json=_chat("Hello"))])
    assert (unknown.finish_reason, unknown.output) == ("error", None) and "answered 404" in unknown.error, unknown
    assert gone.finish_reason == "error" and "did not answer after 1 tries" in gone.error, gone
    assert regex.finish_reason == "error" and "decoding.constraint=none" in regex.error, regex
    assert all(KEY not in g.error and g.error.startswith("engine_error: ") for g in (unknown, gone, regex))


def test_a_remote_only_chat_answers_its_calls_and_keeps_openai_tool_keys():
    """Without the local template the chat goes to a strict server's shape: the Hermes blocks of an
    assistant turn become tool_calls with ids the tool messages answer; tools keep OpenAI's keys."""
    from inference.engines.openai_chat import with_calls
    from inference.toolcalls import CALL_FORMATS

    said = with_calls("Checking.", [{"name": "get_weather", "arguments": {"unit": "celsius"}}], CALL_FORMATS["hermes"])
    tools = [{"type": "function", "function": {**WEATHER[0]["function"], "return": {"type": "string"}}}]
    chat = json.dumps({"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": said},
                                    {"role": "tool", "content": "Sunny"}], "tools": tools})
    body = _chat_engine("http://127.0.0.1:1/v1", local_template=False)._body(Request("p", "", (), None, chat_json=chat))
    assistant, tool = body["messages"][1:]
    assert assistant == {"role": "assistant", "content": "Checking.", "tool_calls": [{
        "id": "call_1_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"unit": "celsius"}'}}]}
    assert tool == {"role": "tool", "content": "Sunny", "tool_call_id": "call_1_0"}
    assert body["tools"] == WEATHER and "model" not in body and body["seed"] == 0
    local = _chat_engine("http://127.0.0.1:1/v1")._body(Request("p", "", (), None, chat_json=chat))
    assert local["messages"] == json.loads(chat)["messages"] and local["tools"] == tools, "sent as built"


@pytest.mark.shared_data
def test_chat_refuses_an_agent_grammar_at_validation(etapp_data, embedded_model):
    """A ReAct step regex (or text-or-calls) has no chat-completions form: validation names the fix.
    The judge's guided JSON through engine=chat is fine (response_format)."""
    from inference.errors import ConfigError
    from tests.inference.test_config import _validate

    base = ["dataset=etapp", f"dataset.path={etapp_data}", "dataset.users=[James_Harrington]",
            "dataset.instructions=[1]", "dataset.methods=[react]", "engine=chat", "engine.base_url=http://127.0.0.1:1/v1"]
    with pytest.raises(ConfigError, match=r"engine=chat cannot apply decoding.constraint=xgrammar .* set "
                                          r"decoding.constraint=none"):
        _validate([*base, "decoding.constraint=xgrammar"])
    _validate([*base, "engine@roles.judge.engine=chat", "roles.judge.engine.base_url=http://127.0.0.1:1/v1",
               "roles.judge.decoding.constraint=xgrammar"])


def test_a_chat_enters_the_cache_key_and_a_request_without_one_keeps_its_old_key():
    """Two chats never share a stored answer, tokens or not; a request of an engine that sends no
    chat keeps the key it had before `chat_json` existed (pinned from that code), so old caches hold."""
    from inference.cache import request_key

    tokens = Request("p-1", "text", (1, 2, 3), '{"type":"object"}', call_format="hermes", sample_index=2)
    assert request_key(tokens, {"model": "m"}) == "d085ee2341b8f92f004adbe281d65fa8a46e72e843c9191e05e094e63bb0f62b"
    keys = {request_key(Request("p-1", "", ids, None, chat_json=_chat(text)), {"model": "m"})
            for ids in ((), (1, 2, 3)) for text in ("Hello", "Hello!")}
    assert len(keys) == 4


@pytest.mark.vllm
def test_chat_engine_runs_a_single_call_benchmark_for_a_remote_only_model(tmp_path, vllm_server, tiny_model,
                                                                          scratch_env):
    """The sample benchmark through engine=chat with nothing rendered here (engine.local_template=false):
    the schema goes as response_format, every prompt's tokens are the server's count."""
    done = run_toolsweep(tmp_path / "run", [*tiny_args(tiny_model, vllm=False, max_new_tokens=48), "dataset.limit=1",
                                            "engine=chat", f"engine.base_url={vllm_server}", "engine.local_template=false",
                                            f"engine.api_key_env={CHAT_KEY_ENV}", "engine.cache=false"],
                         env={**scratch_env, CHAT_KEY_ENV: KEY})
    assert done.returncode == 0, done.stderr[-3000:]
    samples = pl.read_parquet(tmp_path / "run" / "samples.parquet")
    assert samples["error"].null_count() == samples.height and (samples["prompt_tokens"] > 0).all(), samples
    facts = json.loads((tmp_path / "run" / "run.json").read_text())["roles"]["model"]
    assert facts["engine"] == "chat" and facts["prompt_tokens"] == samples["prompt_tokens"].sum()
