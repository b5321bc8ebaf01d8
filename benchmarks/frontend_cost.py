"""What an OpenAI-compatible frontend costs a request before the engine's first token: the
measured part of the engine's own per-request TTFT cost (``ttft_ms_<backend>``, docs/model.md).

1. HTTP and streaming: the engine emulator (``slaplan emulate``, FastAPI + uvicorn, streamed
   server-sent events, as vLLM's and SGLang's API servers) run ``--speed`` times faster than
   the model, so the engine's own modelled prefill and first step are microseconds; a client
   sends tiny streamed completions one at a time. Its TTFT less the emulator's modelled
   first-token time is the cost of the request's path: connection, parsing, scheduling in the
   server's event loop, the first chunk out.
2. Tokenization (``--tokenizer-python``: an interpreter with Hugging Face ``tokenizers``, e.g.
   genai-bench's): a byte-level BPE tokenizer of ``--vocab`` tokens is trained on the
   repository's own text and times the encoding of a prompt of ``--prompt-tokens`` tokens, the
   work an engine's frontend does on every request before scheduling it.

3. genai-bench (``--genai-bench``): the real genai-bench, as ``slaplan bench`` runs it, measures
   the same fast emulator at one client; its median TTFT less the emulator's modelled first-token
   time and less the HTTP path of 1. is what genai-bench adds to a request beyond a minimal client:
   the harness term a calibration to genai-bench's measurements holds apart from the engine
   (``profiler.model.harness.GENAI_BENCH_MS``).

Medians over ``--requests``; the machine's load counts, so run it on a quiet machine.

    python benchmarks/frontend_cost.py [--requests 300] [--tokenizer-python .venv-genai-bench/bin/python]
                                       [--genai-bench]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # tests.procs reads its neighbours as top-level modules
MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# Run by --tokenizer-python: train a byte-level BPE on the files named in argv[3:], then time
# encoding a prompt of argv[1] tokens argv[2] times; prints the median ms.
TOKENIZE = """
import statistics, sys, time
from tokenizers import ByteLevelBPETokenizer
tokens, runs, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4:]
tok = ByteLevelBPETokenizer()
tok.train(files, vocab_size=int(sys.argv[3]), show_progress=False)
text = " ".join(open(f, encoding="utf-8").read() for f in files)
ids = tok.encode(text).ids[:tokens]
prompt = tok.decode(ids)
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    n = len(tok.encode(prompt).ids)
    times.append((time.perf_counter() - t0) * 1e3)
print(n, statistics.median(times))
"""


def http_path_ms(requests: int, speed: float) -> tuple[float, float, float]:
    """(median client TTFT ms, the emulator's modelled first-token ms, their difference) of
    ``requests`` tiny streamed completions sent one at a time to an emulator ``speed`` × faster
    than the model."""
    import httpx

    from profiler.emulator.timing import model_timing, serving_config
    from profiler.model.config import Parallel
    from tests.procs import free_port, stop, wait_ready

    timing, _ = model_timing(serving_config(MODEL, "h100_sxm", "vllm", Parallel(), "agg"), speed=speed)
    modelled_ms = (timing.fixed_s + timing.prefill_s(4) + timing.decode_step_s(1, 4)) / speed * 1e3
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "emulator.log"
        proc = subprocess.Popen([sys.executable, "-m", "api.cli", "emulate", "--model", MODEL, "--gpu", "h100_sxm",
                                 "--backend", "vllm", "--speed", str(speed), "--port", str(port)], cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=log.open("w"), stderr=subprocess.STDOUT)
        try:
            wait_ready(proc, f"http://127.0.0.1:{port}/health", log)
            body = {"model": MODEL, "prompt": "Say hi.", "max_tokens": 2, "stream": True}
            ttft = []
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                for i in range(requests + 10):  # the first 10 warm up
                    start = time.perf_counter()
                    with client.stream("POST", "/v1/completions", json=body) as response:
                        for line in response.iter_lines():
                            if line.startswith("data:"):
                                if i >= 10:
                                    ttft.append((time.perf_counter() - start) * 1e3)
                                break
        finally:
            stop(proc)
    client_ms = statistics.median(ttft)
    return client_ms, modelled_ms, client_ms - modelled_ms


def genai_bench_ms(speed: float, scenario: str = "D(200,40)") -> tuple[float, float, int]:
    """(genai-bench's median TTFT ms, the emulator's modelled first-token ms, requests) at one client
    against an emulator ``speed`` × faster than the model, ``scenario``'s prompts."""
    from benchmarks.measured_calibration import measure
    from profiler.bench.runner import read_results
    from profiler.emulator.timing import model_timing, serving_config
    from profiler.model.config import Parallel

    isl = int(scenario.split("(")[1].split(",")[0])
    timing, _ = model_timing(serving_config(MODEL, "h100_sxm", "vllm", Parallel(), "agg"), speed=speed)
    modelled_ms = (timing.fixed_s + timing.prefill_s(isl) + timing.decode_step_s(1, isl)) / speed * 1e3
    with tempfile.TemporaryDirectory() as tmp:
        results, _ = read_results(measure("h100_sxm", 1 / speed, [1], scenario, Path(tmp)))
    [one] = results
    return one.ttft.p50_ms, modelled_ms, one.successes


def tokenize_ms(python: str, tokens: int, vocab: int, runs: int) -> tuple[int, float]:
    """(tokens encoded, median ms) of a ``tokens``-token prompt by a BPE of ``vocab`` trained on
    the repository's documentation and Python sources, in the interpreter ``python``."""
    files = sorted(str(p) for p in (*ROOT.glob("docs/*.md"), *ROOT.glob("profiler/**/*.py")))
    out = subprocess.run([python, "-c", TOKENIZE, str(tokens), str(runs), str(vocab), *files], check=True,
                         capture_output=True, text=True, timeout=600).stdout.split()
    return int(out[0]), float(out[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="streamed requests timed (default 300)")
    parser.add_argument("--speed", type=float, default=1000.0,
                        help="emulator speed-up over the model (default 1000: the modelled engine is microseconds)")
    parser.add_argument("--tokenizer-python", metavar="PYTHON",
                        help="an interpreter with Hugging Face tokenizers (e.g. genai-bench's environment's)")
    parser.add_argument("--prompt-tokens", type=int, default=4000, help="prompt length tokenized (default 4000)")
    parser.add_argument("--vocab", type=int, default=32000, help="BPE vocabulary trained (default 32000)")
    parser.add_argument("--genai-bench", action="store_true", help="also what genai-bench adds to a request")
    args = parser.parse_args(argv)
    client, modelled, path = http_path_ms(args.requests, args.speed)
    print(f"HTTP path (emulator, {args.requests} streamed requests one at a time): client TTFT median "
          f"{client:.2f} ms, of which the modelled engine {modelled:.3f} ms: {path:.2f} ms")
    if args.genai_bench:
        ttft, engine, n = genai_bench_ms(args.speed)
        print(f"genai-bench (one client, {n} requests of D(200,40)): median TTFT {ttft:.2f} ms, of which the modelled "
              f"engine {engine:.3f} ms and the HTTP path {path:.2f} ms: genai-bench adds {ttft - engine - path:.2f} ms")
    if args.tokenizer_python:
        n, ms = tokenize_ms(args.tokenizer_python, args.prompt_tokens, args.vocab, 50)
        print(f"tokenization: {n} tokens by a {args.vocab}-token byte-level BPE in {ms:.2f} ms median "
              f"({1e3 * ms / n:.2f} µs a token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
