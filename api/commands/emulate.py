"""``slaplan emulate``: an OpenAI-compatible engine emulator timed by the performance model.

It serves ``/v1/chat/completions``, ``/v1/completions``, ``/v1/models`` and ``/metrics`` on
``--host``:``--port`` until interrupted, so that benchmarks and dashboards can be rehearsed
without GPUs. ``--speed 2`` makes it twice as fast as the model predicts, ``0.5`` twice as slow.
Answers end at a sampled length (mean ``--mean-answer-tokens``, seeded by ``--seed``) unless the
request sets ``ignore_eos``; ``max_tokens`` and ``min_tokens`` are honoured. ``--mode prefill``
and ``--mode decode`` play the two roles of a disaggregated unit, with vLLM's KV-transfer
handoff and SGLang's bootstrap handoff (``--bootstrap-port``: where the prefill role also listens
for decode engines asking for a request's KV cache).
"""

from __future__ import annotations

import argparse
import sys

from api.commands.arguments import port


def register(subparsers, summary: str) -> None:
    parser = subparsers.add_parser(
        "emulate", help=summary,
        description="Engine emulator: continuous batching, a batch limit and a queue, timed by the "
                    "performance model for one engine configuration.")
    parser.add_argument("--model", required=True, help="Hugging Face id or catalog name, or a path to a config.json")
    parser.add_argument("--gpu", required=True, help="GPU type, e.g. h100_sxm, a100_sxm")
    parser.add_argument("--backend", default="vllm", choices=("vllm", "sglang", "trtllm"))
    parser.add_argument("--tp", type=int, default=1, help="tensor parallelism")
    parser.add_argument("--pp", type=int, default=1, help="pipeline parallelism")
    parser.add_argument("--dp", type=int, default=1, help="attention data-parallelism (ranks with their own batch)")
    parser.add_argument("--ep", type=int, default=1, help="expert parallelism (MoE)")
    parser.add_argument("--mode", default="agg", choices=("agg", "prefill", "decode"),
                        help="agg: prefill and decode; prefill: one token per request; decode: no prompt cost")
    parser.add_argument("--precision", help="weights: bf16 | fp8 | fp4 | int4 (default: implied by the model)")
    parser.add_argument("--kv-dtype", help="KV cache: bf16 | fp8 | fp4")
    parser.add_argument("--max-batch", type=int, help="running sequences per engine (default: what KV memory allows)")
    parser.add_argument("--max-num-tokens", type=int, help="tokens per step of each attention-DP rank (prefill chunk)")
    parser.add_argument("--speed", type=float, default=1.0, help="faster (>1) or slower (<1) than the model predicts")
    parser.add_argument("--chars-per-token", type=float, default=1.0,
                        help="prompt bytes per token (1 = slaplan's byte-level tokenizer; ~4 for real tokenizers)")
    parser.add_argument("--mean-answer-tokens", type=float, default=256,
                        help="mean length (tokens) of an answer the model ends by itself (sampled per request; "
                             "requests with ignore_eos always run to max_tokens)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seeds the sampled answer lengths (same seed, request and prompt: same length)")
    parser.add_argument("--served-model-name", help="model name in requests and /v1/models (default: --model)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port, required=True)
    parser.add_argument("--bootstrap-port", type=port,
                        help="--mode prefill: also listen here as SGLang's bootstrap server, where decode engines "
                             "wait for a request's KV cache (SGLang's --disaggregation-bootstrap-port)")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="exit when the process that started this one ends (as slaplan's online search "
                             "starts emulators: none outlives a killed worker)")
    parser.set_defaults(func=run)


# Options whose model field has another name.
_OPTION_OF_FIELD = {"moe_ep": "ep"}


def option_errors(exc) -> list[str]:
    """``--option: message`` for each error of a pydantic ValidationError raised by ``build``."""
    out = []
    for err in exc.errors(include_input=False):
        name = str(err["loc"][-1]) if err["loc"] else "configuration"
        message = err["msg"].removeprefix("Value error, ")
        out.append(f"--{_OPTION_OF_FIELD.get(name, name).replace('_', '-')}: {message}")
    return out


def build(args: argparse.Namespace):
    """The emulator's FastAPI app for ``args`` (raises ModelError / ValueError when invalid)."""
    from profiler.model.config import Parallel
    from profiler.emulator.server import EmulatorSettings, create_app
    from profiler.emulator.engine import Engine
    from profiler.emulator.timing import model_timing, serving_config

    settings = EmulatorSettings(served_model_name=args.served_model_name or args.model,
                                chars_per_token=args.chars_per_token,
                                mean_answer_tokens=args.mean_answer_tokens, seed=args.seed)
    parallel = Parallel(tp=args.tp, pp=args.pp, dp=args.dp, moe_ep=args.ep)
    model_name, arch = args.model, None
    if args.model.endswith(".json"):
        from profiler.hub import load_model

        arch, implied = load_model(args.model)
        args.precision = args.precision or implied
    config = serving_config(model_name, args.gpu, args.backend, parallel, args.mode, precision=args.precision,
                            kv_dtype=args.kv_dtype, max_batch=args.max_batch, max_num_tokens=args.max_num_tokens)
    timing, ranks = model_timing(config, args.mode, speed=args.speed, arch=arch)
    return create_app(Engine(timing, ranks), settings), timing, ranks


def run(args: argparse.Namespace) -> int:
    import os

    from pydantic import ValidationError

    from profiler.emulator.server import serve
    from profiler.model.errors import ModelError

    parent = os.getppid()  # before the model is built: the parent may end meanwhile
    if args.bootstrap_port is not None and args.mode != "prefill":
        print("error: --bootstrap-port: only a prefill engine (--mode prefill) serves bootstrap rooms", file=sys.stderr)
        return 2
    try:
        app, timing, ranks = build(args)
    except ModelError as exc:
        print(f"error: {exc.field}: {exc.message}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        for line in option_errors(exc):
            print(f"error: {line}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    print(f"emulating {args.model} on {args.gpu} ({args.backend}, tp={args.tp} pp={args.pp} dp={args.dp} "
          f"ep={args.ep}, {args.mode}, speed {args.speed:g}): decode step {timing.decode_step_s(1, 1024) * 1e3:.2f} ms "
          f"at batch 1, prefill of 1024 tokens {timing.prefill_s(1024) * 1e3:.2f} ms, "
          f"{ranks} rank(s) of {timing.max_batch} sequences / {timing.kv_tokens} KV tokens; "
          f"http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    if args.exit_with_parent:
        from profiler.bench.tether import tether_to_parent

        tether_to_parent(lambda: os._exit(0), parent=parent)  # nothing to save: requests in flight die with their client
    try:
        serve(app, args.host, args.port, bootstrap_port=args.bootstrap_port)
    except OSError as exc:
        print(f"error: --port / --bootstrap-port: {exc}", file=sys.stderr)
        return 2
    return 0
