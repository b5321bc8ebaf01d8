"""The accuracy benchmark's TTFT tail table: mean less median TTFT of the rows publishing both."""

from benchmark_scripts import load


def _row(clients: int, mean: str, median: str, **changes) -> dict:
    row = {"gpu": "mi355x", "backend": "sglang", "precision": "fp4", "mode": "agg", "isl": "1024",
           "concurrency": str(clients), "ttft_ms": mean, "median_ttft_ms": median, "date": "2026-06-11",
           "provenance": "inferencex | framework=sglang; image=lmsysorg/sglang:v0.5.12-rocm700-mi35x"}
    return row | changes


def test_ranges_over_clients_per_run_and_prompt_length():
    rows = [_row(4, "173", "102"), _row(8, "148", "94"), _row(4, "323", "274", isl="8192"),
            _row(4, "352", "115", precision="fp8", date="2026-05-27")]
    lines = load("accuracy").tail_table(rows).splitlines()[3:]
    assert len(lines) == 2
    fp4, fp8 = sorted(lines, key=lambda line: "fp8" in line)
    assert fp4.endswith("1024: 54 to 71  8192: 49 to 49") and "2026-06" in fp4 and "v0.5.12-rocm700-mi35x" in fp4
    assert fp8.endswith("1024: 237 to 237") and "2026-05" in fp8


def test_rows_without_both_statistics_disaggregated_or_loaded_are_left_out():
    rows = [_row(4, "", "102"), _row(4, "173", ""), _row(4, "173", "102", mode="disagg"), _row(64, "344", "118")]
    assert len(load("accuracy").tail_table(rows).splitlines()) == 3  # title, head and rule only
