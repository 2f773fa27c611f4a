"""engine=openai: a real vLLM server on 127.0.0.1 gives the in-process engine's greedy outputs;
retries and failure rows against a small local HTTP server.

Both engines serve the tiny seeded model: the test is about the request path (token ids, the
structured-output field, sampling fields, reading the answer back), and equality of greedy
outputs holds for noise as it does for a trained model, at a tenth of the start-up."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from inference.engines import Request
from inference.engines.openai_server import OpenAIEngine, ServerUnreachable, _call
from inference.errors import EngineError
from tests.conftest import tiny_args
from tests.inference.test_end_to_end import run_toolsweep

KEY = "local-test-key"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(tiny_model, scratch_env, tmp_path_factory):
    """`vllm serve` (its module entry point: the CPU wheel's `vllm` script cannot find its own
    version) with the tiny model, float32, outlines, an API key; stopped after the tests."""
    port, log = _free_port(), tmp_path_factory.mktemp("server") / "server.log"
    env = {"VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}", **scratch_env}
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model),
               "--kv-cache-memory-bytes", str(2**26),
               "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager", "--seed", "0",
               "--structured-outputs-config", '{"backend": "outlines"}', "--api-key", KEY]
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
                time.sleep(2)
        else:
            pytest.fail("vllm server did not become healthy in 900 s")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


@pytest.mark.vllm
def test_server_engine_outputs_equal_the_in_process_engine(tmp_path, vllm_server, tiny_model, scratch_env):
    """The server's greedy outputs are the in-process engine's (which runs quiet: no bar drawn, and
    its batches still run whole)."""
    common = [*tiny_args(tiny_model, vllm=False), "dataset.limit=1", "model.dtype=float32", "engine.cache=false"]
    local = run_toolsweep(tmp_path / "local", [*common, "engine.cpu_kvcache_gib=0.0625", "quiet=true"], env=scratch_env)
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
    judge's prompts are the same in both runs)."""
    from tests.inference.test_etapp_run import one_case

    sid = "tool_given/fc/James_Harrington-1"
    script = tmp_path / "agent.jsonl"
    script.write_text(json.dumps({"sample_id": sid, "turn": 1, "answer": "Mild and dry in San Francisco today."}) + "\n")
    common = ["dataset=etapp", f"dataset.path={etapp_data}", *one_case("James_Harrington", 1)[:-1], "engine=script",
              f"engine.script={script}", f"roles.judge.model.path={tiny_model}", "roles.judge.model.embedded=false",
              "roles.judge.model.dtype=float32", "roles.judge.decoding.constraint=outlines",
              "roles.judge.decoding.max_new_tokens=1536", "dataset.judge_analysis_chars=8", "dataset.judge_retries=0",
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
