"""The engine emulator: OpenAI-compatible HTTP (httpx, streaming) and its scheduler's timing."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from profiler.emulator.engine import Engine, Rank, Sequence, Stats, Timing, count_tokens
from procs import MODEL, start_emulator, stop


def _events(response) -> list:
    out = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


@pytest.mark.slow
def test_models_and_metrics(emulator):
    models = httpx.get(f"{emulator}/v1/models").json()
    assert [m["id"] for m in models["data"]] == [MODEL]
    text = httpx.get(f"{emulator}/metrics").text
    assert "vllm:num_requests_running" in text and "vllm:generation_tokens_total" in text


@pytest.mark.slow
def test_streaming_chat_with_usage(emulator):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "héllo world"}], "max_tokens": 5,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    with httpx.stream("POST", f"{emulator}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = _events(r)
    assert events[-1] == "[DONE]"
    tokens = [e for e in events[:-1] if e["choices"]]
    assert len(tokens) == 5
    assert tokens[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [t["choices"][0]["finish_reason"] for t in tokens] == [None] * 4 + ["length"]
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    before = httpx.get(f"{emulator}/metrics").text
    assert 'vllm:request_success_total{model_name="%s",finished_reason="length"}' % MODEL in before


@pytest.mark.slow
def test_streaming_without_usage_and_completions(emulator):
    body = {"model": MODEL, "prompt": "abcd", "max_tokens": 3, "stream": True, "ignore_eos": True}
    with httpx.stream("POST", f"{emulator}/v1/completions", json=body, timeout=30) as r:
        events = _events(r)
    assert events[-1] == "[DONE]" and all(e["choices"] for e in events[:-1]) and len(events) == 4
    assert events[0]["object"] == "text_completion"


@pytest.mark.slow
def test_non_streaming(emulator):
    r = httpx.post(f"{emulator}/v1/completions", json={"prompt": "abcd", "max_tokens": 4, "ignore_eos": True}, timeout=30)
    data = r.json()
    assert data["choices"][0]["text"] == "abcd" and data["choices"][0]["finish_reason"] == "length"
    assert data["usage"] == {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8}
    r = httpx.post(f"{emulator}/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}],
                                                            "max_completion_tokens": 2, "ignore_eos": True}, timeout=30)
    assert r.json()["choices"][0]["message"]["content"] == "ab"


@pytest.mark.slow
def test_errors_look_like_openai(emulator):
    r = httpx.post(f"{emulator}/v1/chat/completions", json={"model": "other", "messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 404 and "does not exist" in r.json()["error"]["message"]
    r = httpx.post(f"{emulator}/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})
    assert r.status_code == 400
    r = httpx.post(f"{emulator}/v1/chat/completions", json={"messages": []})
    assert r.status_code == 400
    assert httpx.post(f"{emulator}/v1/chat/completions", content=b"{").status_code == 400


@pytest.mark.slow
def test_one_request_takes_what_the_model_says(emulator):
    from profiler.model.config import Parallel
    from profiler.emulator.timing import model_timing, serving_config

    timing, _ = model_timing(serving_config(MODEL, "a100_sxm", "vllm", Parallel(tp=1), "agg"))
    prompt = "x" * 400
    expected_ttft = timing.fixed_s + timing.prefill_s(400) + timing.decode_step_s(1, 400)
    expected_tpot = timing.decode_step_s(1, 410)
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": prompt}], "max_tokens": 20,
                       "stream": True, "ignore_eos": True}).encode()
    with httpx.Client(timeout=30, headers={"content-type": "application/json"}) as client:
        client.get(f"{emulator}/health")  # one warm connection: no connection set-up in the timing
        start = time.monotonic()
        stamps = []
        with client.stream("POST", f"{emulator}/v1/chat/completions", content=body) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    stamps.append(time.monotonic())
    ttft = stamps[0] - start
    tpot = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    # The emulator sleeps what the model says, so it is never much faster; on a loaded machine its
    # wake-ups run late, so the upper bound leaves room for the scheduler, not for the model.
    assert 0.8 * expected_ttft <= ttft <= 1.6 * expected_ttft
    assert 0.85 * expected_tpot <= tpot <= 1.5 * expected_tpot


# --------------------------------------------------------------------------- answer lengths

SHORT = ("--mean-answer-tokens", "4", "--seed", "7")  # answers that end early, with a fixed seed


@pytest.fixture(scope="module")
def short_answers():
    proc, base = start_emulator(*SHORT)
    yield base
    stop(proc)


def _chat(base: str, content: str, **fields) -> tuple[list, dict]:
    """(token events, usage event) of one streamed chat completion."""
    body = {"messages": [{"role": "user", "content": content}], "stream": True,
            "stream_options": {"include_usage": True}, **fields}
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200, r.read()
        events = _events(r)
    assert events[-1] == "[DONE]" and events[-2]["choices"] == []
    return [e for e in events[:-2]], events[-2]["usage"]


@pytest.mark.slow
def test_answers_end_at_their_sampled_length_with_stop(short_answers):
    from profiler.emulator.length import natural_length

    prompt = "tell me about queues"
    natural = natural_length(prompt, mean_tokens=4, seed=7)
    assert natural < 64
    tokens, usage = _chat(short_answers, prompt, max_tokens=64)
    assert len(tokens) == natural == usage["completion_tokens"]
    assert [t["choices"][0]["finish_reason"] for t in tokens] == [None] * (natural - 1) + ["stop"]
    assert tokens[-1]["choices"][0]["delta"].get("content", "") == ""  # the end-of-sequence token has no text
    again, usage_again = _chat(short_answers, prompt, max_tokens=64)
    assert len(again) == natural and usage_again == usage  # the same request gets the same answer
    # not streamed: the same length, reason and usage; the text leaves the end-of-sequence token out
    r = httpx.post(f"{short_answers}/v1/chat/completions", timeout=30,
                   json={"messages": [{"role": "user", "content": prompt}], "max_tokens": 64})
    data = r.json()
    assert data["choices"][0]["finish_reason"] == "stop" and data["usage"] == usage
    assert len(data["choices"][0]["message"]["content"]) == natural - 1


@pytest.mark.slow
def test_ignore_eos_min_tokens_and_max_tokens(short_answers):
    from profiler.emulator.length import natural_length

    prompt = next(p for p in (f"prompt {i}" for i in range(100)) if natural_length(p, mean_tokens=4, seed=7) >= 3)
    natural = natural_length(prompt, mean_tokens=4, seed=7)
    tokens, usage = _chat(short_answers, prompt, max_tokens=40, ignore_eos=True)
    assert len(tokens) == 40 == usage["completion_tokens"] and tokens[-1]["choices"][0]["finish_reason"] == "length"
    assert tokens[-1]["choices"][0]["delta"]["content"]  # a real token, not an end of sequence
    tokens, usage = _chat(short_answers, prompt, max_tokens=40, min_tokens=30)
    assert len(tokens) == max(natural, 31) == usage["completion_tokens"]  # EOS only after 30 tokens
    assert tokens[-1]["choices"][0]["finish_reason"] == "stop"
    tokens, usage = _chat(short_answers, prompt, max_completion_tokens=natural - 1)
    assert len(tokens) == natural - 1 == usage["completion_tokens"] and tokens[-1]["choices"][0]["finish_reason"] == "length"
    r = httpx.post(f"{short_answers}/v1/completions", json={"prompt": prompt, "max_tokens": 30, "min_tokens": 30},
                   timeout=30).json()
    assert r["choices"][0]["finish_reason"] == "length" and r["usage"]["completion_tokens"] == 30
    metrics = httpx.get(f"{short_answers}/metrics").text
    for reason, at_least in (("stop", 1), ("length", 3)):  # this test's own requests; others may add
        line = next(ln for ln in metrics.splitlines() if f'finished_reason="{reason}"' in ln)
        assert int(line.rsplit(" ", 1)[1]) >= at_least


@pytest.mark.slow
def test_the_request_seed_changes_answer_lengths(short_answers):
    from profiler.emulator.length import natural_length

    prompt = "same prompt"
    seeds = [s for s in range(50) if natural_length(prompt, mean_tokens=4, seed=7, request_seed=s)
             != natural_length(prompt, mean_tokens=4, seed=7)]
    assert seeds
    expected = natural_length(prompt, mean_tokens=4, seed=7, request_seed=seeds[0])
    tokens, usage = _chat(short_answers, prompt, max_tokens=200, seed=seeds[0])
    assert len(tokens) == usage["completion_tokens"] == min(expected, 200)


@pytest.mark.slow
@pytest.mark.parametrize("fields,named", [
    ({"max_tokens": 4, "min_tokens": 5}, "min_tokens"),
    ({"min_tokens": -1}, "min_tokens"),
    ({"ignore_eos": "yes"}, "ignore_eos"),
    ({"seed": "x"}, "seed"),
    ({"max_completion_tokens": 1.5}, "max_completion_tokens"),
])
def test_bad_length_fields_are_named(short_answers, fields, named):
    r = httpx.post(f"{short_answers}/v1/chat/completions", timeout=30,
                   json={"messages": [{"role": "user", "content": "x"}], **fields})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(named + ":")


def test_natural_lengths_are_seeded_geometric():
    from profiler.emulator.length import natural_length, output_plan

    prompts = [f"question number {i}" for i in range(4000)]
    lengths = [natural_length(p, mean_tokens=50, seed=1) for p in prompts]
    assert lengths == [natural_length(p, mean_tokens=50, seed=1) for p in prompts]  # deterministic
    assert lengths != [natural_length(p, mean_tokens=50, seed=2) for p in prompts]  # the seed matters
    assert min(lengths) >= 2 and sum(lengths) / len(lengths) == pytest.approx(50, rel=0.08)
    # one token with text, then a 1/49 chance of EOS per token: P(length <= 11) = 1 - (48/49)^10
    assert sum(n <= 11 for n in lengths) / len(lengths) == pytest.approx(1 - (48 / 49) ** 10, abs=0.03)
    assert all(natural_length(p, mean_tokens=2, seed=1) == 2 for p in prompts[:20])
    with pytest.raises(ValueError, match="mean_tokens"):
        natural_length("x", mean_tokens=1.5, seed=1)
    assert output_plan(7, max_tokens=10) == (7, "stop")
    assert output_plan(10, max_tokens=10) == (10, "stop")
    assert output_plan(11, max_tokens=10) == (10, "length")
    assert output_plan(3, max_tokens=10, ignore_eos=True) == (10, "length")
    assert output_plan(3, max_tokens=10, min_tokens=5) == (6, "stop")
    assert output_plan(3, max_tokens=10, min_tokens=10) == (10, "length")


def test_prefill_engine_answers_one_token():
    timing = _timing(prefill_only=True)

    async def go():
        engine = Engine(timing)
        engine.start()
        try:
            long = await engine.submit(10, 50, 40, "stop")
            short = await engine.submit(10, 50, 1, "stop")
            counts = []
            for seq in (long, short):
                n = 0
                while (event := await seq.events.get()) is not None:
                    n += event
                counts.append((n, seq.finish_reason))
            return counts, dict(engine.stats.finished)
        finally:
            await engine.stop()

    counts, finished = asyncio.run(go())
    assert counts == [(1, "length"), (1, "stop")] and finished == {"stop": 1, "length": 1}


def test_prefill_and_decode_roles_play_the_kv_transfer_handoff():
    """vLLM's KV-connector fields: the prefill role says where its KV cache is when asked to keep it
    for a remote decode; the decode role takes kv_transfer_params only when they name that prefill."""
    from fastapi.testclient import TestClient

    from profiler.emulator.server import EmulatorSettings, create_app

    settings = EmulatorSettings(served_model_name=MODEL)
    body = {"prompt": "abcd", "max_tokens": 1}
    with TestClient(create_app(Engine(_timing(prefill_only=True)), settings)) as prefill:
        kept = prefill.post("/v1/completions", json={**body, "kv_transfer_params": {"do_remote_decode": True}}).json()
        plain = prefill.post("/v1/completions", json=body).json()
    params = kept["kv_transfer_params"]
    assert params["do_remote_prefill"] is True and params["remote_engine_id"] and "kv_transfer_params" not in plain
    with TestClient(create_app(Engine(_timing(skip_prefill=True)), settings)) as decode:
        taken = decode.post("/v1/completions", json={**body, "max_tokens": 3, "kv_transfer_params": params})
        refused = decode.post("/v1/completions", json={**body, "kv_transfer_params": {"do_remote_decode": True}})
    assert taken.status_code == 200 and taken.json()["usage"]["completion_tokens"] == 3
    assert refused.status_code == 400 and "kv_transfer_params" in refused.json()["error"]["message"]


def test_a_bootstrap_room_answers_once_its_prefill_is_done():
    """SGLang's handoff: a decode engine waiting for a room is let go when the prefill finishes
    it; a finished room is remembered for a decode that asks later, up to ``kept`` rooms."""
    from profiler.emulator.bootstrap import Rooms

    async def go():
        rooms = Rooms(kept=2)
        waiting = asyncio.create_task(rooms.wait(7, timeout_s=60))
        await asyncio.sleep(0)
        pending = not waiting.done()
        rooms.finish(7)
        released = await waiting
        rooms.finish(8)
        rooms.finish(9)
        return pending, released, await rooms.wait(9, timeout_s=60), await rooms.wait(7, timeout_s=0.01)

    assert asyncio.run(go()) == (True, True, True, False)


def test_prefill_and_decode_roles_play_the_sglang_bootstrap_handoff():
    """The prefill role marks a tagged request's room ready once it has prefilled it and answers
    for it on ``/rooms/{room}``; the decode role refuses a malformed tag naming the field, and an
    unreachable bootstrap server naming the port."""
    from fastapi.testclient import TestClient

    from procs import free_port
    from profiler.emulator.server import EmulatorSettings, create_app

    settings = EmulatorSettings(served_model_name=MODEL, bootstrap_timeout_s=0.05)
    tag = {"bootstrap_host": "127.0.0.1", "bootstrap_port": free_port(), "bootstrap_room": 2**63 + 5}
    body = {"prompt": "abcd", "max_tokens": 8}
    with TestClient(create_app(Engine(_timing(prefill_only=True)), settings)) as prefill:
        before = prefill.get(f"/rooms/{tag['bootstrap_room']}")
        answer = prefill.post("/v1/completions", json={**body, **tag})
        after = prefill.get(f"/rooms/{tag['bootstrap_room']}")
    assert before.status_code == 404 and answer.json()["usage"]["completion_tokens"] == 1
    assert after.status_code == 200 and after.json() == {"room": 2**63 + 5, "ready": True}
    with TestClient(create_app(Engine(_timing(skip_prefill=True)), settings)) as decode:
        malformed = decode.post("/v1/completions", json={**body, **tag, "bootstrap_room": "x"})
        portless = decode.post("/v1/completions", json={**body, **tag, "bootstrap_port": None})
        unreachable = decode.post("/v1/completions", json={**body, **tag})
        rooms_here = decode.get("/rooms/1")
    assert malformed.status_code == 400 and malformed.json()["error"]["message"].startswith("bootstrap_room:")
    assert portless.status_code == 400 and portless.json()["error"]["message"].startswith("bootstrap_port:")
    assert unreachable.status_code == 502 and "bootstrap_port" in unreachable.json()["error"]["message"]
    assert rooms_here.status_code == 404


def test_only_a_prefill_engine_takes_a_bootstrap_port(capsys):
    from api.cli import main

    code = main(["emulate", "--model", MODEL, "--gpu", "a100_sxm", "--port", "1", "--mode", "decode",
                 "--bootstrap-port", "2"])
    assert code == 2 and "--bootstrap-port" in capsys.readouterr().err


# --------------------------------------------------------------------------- the scheduler alone


def _timing(**kw) -> Timing:
    base = dict(decode_step_s=lambda b, ctx: 0.010, prefill_s=lambda n, k=1: 0.010 * k, fixed_s=0.0, max_batch=64,
                max_num_tokens=8192, kv_tokens=100_000)
    base.update(kw)
    return Timing(**base)


async def _run(engine: Engine, requests: list[tuple[int, int]]) -> list[tuple[float, float]]:
    """(first-token time, end time) of each request, in s from the start."""
    engine.start()
    t0 = time.monotonic()

    async def one(prompt, out):
        seq = await engine.submit(prompt, out)
        first = None
        while await seq.events.get() is not None:
            first = first or time.monotonic() - t0
        return first, time.monotonic() - t0

    try:
        return await asyncio.gather(*(one(p, o) for p, o in requests))
    finally:
        await engine.stop()


def test_batch_limit_queues_requests():
    times = asyncio.run(_run(Engine(_timing(max_batch=2)), [(10, 5)] * 4))
    first_two_end = max(t[1] for t in times[:2])
    assert all(t[0] >= first_two_end - 0.005 for t in times[2:])  # the others waited for a slot
    # Two prompts prefilled in one step (20 ms) and one decode step (10 ms): their first tokens
    # come together, never sooner; later only by the host's scheduling delays (e.g. a GC pass).
    assert times[0][0] == pytest.approx(times[1][0], abs=0.005)
    assert 0.029 <= times[0][0] < 0.055


def test_speed_factor_scales_time():
    slow = asyncio.run(_run(Engine(_timing(speed=0.5)), [(10, 10)]))[0][1]
    fast = asyncio.run(_run(Engine(_timing(speed=2.0)), [(10, 10)]))[0][1]
    assert slow / fast == pytest.approx(4.0, rel=0.2)


def test_load_slows_steps_down():
    timing = _timing(decode_step_s=lambda b, ctx: 0.005 + 0.001 * b, prefill_s=lambda n, k=1: 0.0001 * n * k)
    alone = asyncio.run(_run(Engine(timing), [(100, 20)]))[0]
    crowd = asyncio.run(_run(Engine(timing), [(100, 20)] * 16))
    assert max(c[1] for c in crowd) > alone[1] * 1.5
    assert max(c[0] for c in crowd) > alone[0]


def test_prompts_of_one_step_are_prefilled_in_one_pass():
    # a pass streams the weights once (5 ms) whatever it holds, then 0.1 ms per prompt token
    timing = _timing(prefill_s=lambda n, k=1: 0.005 + 0.0001 * n * k, max_num_tokens=300)
    rank = Rank(timing, Stats())
    for _ in range(4):
        rank.enqueue(Sequence(prompt_tokens=100, max_tokens=4, arrival=0.0, output_tokens=4))
    duration, emitting, chunks = rank.plan_step()
    # three whole prompts fit the 300-token budget: one pass of 300 tokens, not three of 100
    assert list(chunks.values()) == [100, 100, 100] and len(emitting) == 3
    assert duration == pytest.approx(0.005 + 0.030 + 0.010)
    rank.finish_step(emitting, chunks, now=duration)
    duration, emitting, chunks = rank.plan_step()
    # the fourth prompt fits what the three decoding sequences leave of the budget
    assert list(chunks.values()) == [100] and len(emitting) == 4
    assert duration == pytest.approx(0.005 + 0.010 + 0.010)


def test_token_counting():
    assert count_tokens("héllo", 1.0) == 6  # bytes, as slaplan's byte-level tokenizer counts
    assert count_tokens("abcdefgh", 4.0) == 2
    assert count_tokens("", 1.0) == 1


@pytest.mark.parametrize("option, value, named", [
    ("--speed", "inf", "--speed: Input should be a finite number"),
    ("--speed", "1e-308", "--speed: Input should be greater than or equal to 0.001"),
    ("--speed", "0", "--speed: Input should be greater than or equal to 0.001"),
    ("--chars-per-token", "inf", "--chars-per-token: Input should be a finite number"),
    ("--chars-per-token", "-1", "--chars-per-token: Input should be greater than 0"),
    ("--mean-answer-tokens", "nan", "--mean-answer-tokens: Input should be a finite number"),
    ("--mean-answer-tokens", "1", "--mean-answer-tokens: Input should be greater than or equal to 2"),
    ("--max-batch", "0", "--max-batch: Input should be greater than 0"),
    ("--ep", "0", "--ep: Input should be greater than 0"),
    ("--tp", "-2", "--tp: Input should be greater than 0"),
])
def test_bad_options_are_refused_naming_them(capsys, option, value, named):
    """Nothing is served: the option at fault is named and the exit code is 2."""
    from api.cli import main

    code = main(["emulate", "--model", MODEL, "--gpu", "a100_sxm", "--port", "1", option, value])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"error: {named}"]


@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_a_port_out_of_range_is_a_usage_error(capsys, port):
    from api.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["emulate", "--model", MODEL, "--gpu", "a100_sxm", "--port", port])
    assert exit_.value.code == 2
    assert f"--port: must be a TCP port from 1 to 65535, got {port!r}" in capsys.readouterr().err
