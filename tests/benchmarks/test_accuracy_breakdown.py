"""The held-out error breakdown of benchmarks/accuracy.py."""

import numpy as np
from benchmark_scripts import load

breakdown = load("accuracy_breakdown")


def test_client_bins_cover_every_concurrency_in_order():
    bins = [breakdown.client_bin(c) for c in (1, 8, 9, 64, 65, 256, 257, 1024, 1025, 10**6)]
    assert bins[0] == bins[1] != bins[2] == bins[3] != bins[4]
    assert bins[-2] == bins[-1] != bins[-3]
    assert sorted(set(bins), key=breakdown._order) == list(dict.fromkeys(bins))


def test_each_split_is_scored_within_recorded_and_inferred_rows_apart():
    rows = [{"backend": b, "gpu": "b200_sxm", "concurrency": c, "isl": 1024, "osl": 1024, "provenance": "s | x"}
            for b, c in (("sglang", 4), ("sglang", 512), ("trtllm", 4), ("trtllm", 512))]
    inferred = np.array([False, False, True, True])
    measured = np.full(4, 100.0)
    ttft = np.array([110.0, 90.0, 50.0, 200.0])  # recorded rows 10% off, inferred rows 50% and 100% off
    text = breakdown.breakdown_table("t", breakdown.labels(rows, range(4)), inferred, np.ones(4, dtype=bool),
                                     ttft, measured, measured, measured)
    lines = {tuple(line.split()[:3]): line for line in text.splitlines()[3:]}
    assert "10.0%" in lines[("recorded", "backend", "sglang")]
    assert "75.0%" in lines[("inferred", "backend", "trtllm")]
    assert not any(key[:3] == ("recorded", "backend", "trtllm") for key in lines)


def test_rows_are_split_by_what_their_recipes_say_of_speculative_decoding():
    rows = [{"backend": "sglang", "concurrency": 16, "spec_tokens": s} for s in (2, "0", "", None)]
    rows[3].pop("spec_tokens")
    assert breakdown.labels(rows, range(4))["spec"].tolist() == ["drafts 2", "none", "not stated", "not stated"]
