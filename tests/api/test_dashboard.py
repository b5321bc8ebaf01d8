"""The web dashboard in a real headless Chromium, against a real `slaplan serve` (embedded
worker, SQLite in a temporary folder, a random port on 127.0.0.1).

Every page is opened, its charts must hold data points, the submit form must take a DGDR to
Ready on screen and show an invalid one's error next to its field, and no page may log a
console error. A screenshot of each page is kept in test-artifacts/dashboard/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from procs import SLAPLAN, free_port, stop, wait_ready
from paths import ROOT

pytestmark = pytest.mark.slow

ARTIFACTS = ROOT / "test-artifacts" / "dashboard"
CHROMIUM = os.environ.get("SLAPLAN_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
DGDRS = "/apis/nvidia.com/v1alpha1/namespaces/default/dynamographdeploymentrequests"
JOBS = "/apis/ome.io/v1beta1/namespaces/default/benchmarkjobs"


def _dgdr(name: str, *, ttft: float = 500, itl: float = 20, model: str = "meta-llama/Llama-3.1-70B-Instruct") -> dict:
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "DynamoGraphDeploymentRequest",
        "metadata": {"name": name},
        "spec": {
            "modelName": model,
            "backend": "vllm",
            "sla": {"ttft": ttft, "itl": itl, "isl": 3000, "osl": 500},
            "gpu": {"type": "h200_sxm", "maxNumGPUsPerEngine": 8},
        },
    }


def _job(name: str) -> dict:
    return {
        "apiVersion": "ome.io/v1beta1",
        "kind": "BenchmarkJob",
        "metadata": {"name": name, "annotations": {"slaplan.io/ttft-ms": "300", "slaplan.io/itl-ms": "15"}},
        "spec": {
            "endpoint": {"endpoint": {"url": "http://llm:8000", "apiFormat": "openai", "modelName": "meta-llama/Llama-3.1-8B-Instruct"}},
            "task": "text-to-text",
            "trafficScenarios": ["D(100,100)", "D(2000,200)"],
            "numConcurrency": [1, 4, 16],
            "maxTimePerIteration": 1,
            "maxRequestsPerIteration": 50,
            "outputLocation": {"storageUri": "pvc://bench/results"},
        },
    }


def _measured() -> dict:
    """Results as a benchmark runner writes them: per (scenario, concurrency), times in ms."""
    runs = []
    for scenario, base in (("D(100,100)", 40.0), ("D(2000,200)", 180.0)):
        for c in (1, 4, 16):
            runs.append({
                "scenario": scenario, "concurrency": c,
                "ttftMs": {"mean": base * (1 + c / 8), "p99": base * (1.5 + c / 6)},
                "tpotMs": {"mean": 8 + c * 0.4, "p99": 10 + c * 0.6},
                "outputTokensPerSecond": 110.0 * c, "requestsPerSecond": 0.4 * c, "errorRate": 0.0,
            })
    return {"results": runs, "reports": [{"name": "genai-bench report", "url": "https://files.example/x.xlsx"}]}


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`slaplan serve` with its embedded worker on a fresh SQLite file; yields the base URL."""
    workdir = tmp_path_factory.mktemp("dashboard-serve")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLAPLAN_")}
    env["PYTHONPATH"] = str(ROOT)
    env["SLAPLAN_DATABASE_URL"] = f"sqlite:///{workdir / 'dashboard.db'}"
    log = (workdir / "serve.log").open("a")
    proc = subprocess.Popen(
        [*SLAPLAN, "serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, f"{base}/readyz", workdir / "serve.log", timeout_s=40)
        yield base
    finally:
        stop(proc)
        log.close()


@pytest.fixture(scope="module")
def seeded(server, tmp_path_factory):
    """Two DGDRs (one feasible, one not) planned to the end, a BenchmarkJob not run yet and one
    with measurements and genai-bench's folder."""
    folder = tmp_path_factory.mktemp("genai-bench") / "measured-job"
    (folder / "logs").mkdir(parents=True)
    (folder / "experiment_metadata.json").write_text(json.dumps({"api_model_name": "meta-llama/Llama-3.1-8B-Instruct"}))
    (folder / "logs" / "genai-bench.console.log").write_text("3 iterations measured\n")
    with httpx.Client(base_url=server, timeout=10) as api:
        for body in (_dgdr("llama-70b"), _dgdr("too-fast", ttft=20, itl=2)):
            assert api.post(DGDRS, json=body).status_code == 201
        assert api.post(JOBS, json=_job("waiting-job")).status_code == 201
        assert api.post(JOBS, json=_job("measured-job")).status_code == 201
        status = {"status": {"state": "Completed", "startTime": "2025-01-01T00:00:00Z",
                             "completionTime": "2025-01-01T00:10:00Z", "details": json.dumps(_measured()),
                             "results": _measured()["results"], "resultsLocation": str(folder)}}
        patched = api.patch(f"{JOBS}/measured-job/status", content=json.dumps(status),
                            headers={"content-type": "application/merge-patch+json"})
        assert patched.status_code == 200, patched.text
        deadline = time.monotonic() + 60
        while True:
            states = {i["metadata"]["name"]: i.get("status", {}).get("state") for i in api.get(DGDRS).json()["items"]}
            if states == {"llama-70b": "Ready", "too-fast": "Failed"}:
                break
            assert time.monotonic() < deadline, f"DGDRs did not finish: {states}"
            time.sleep(0.2)
    return server


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is needed for the dashboard tests ({CHROMIUM}); scripts/setup.sh installs it")
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1366, "height": 860},
        )
        context.set_default_timeout(15_000)
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context, request):
    """A fresh tab; fails the test on any console error or uncaught exception."""
    tab = browser_context.new_page()
    problems: list[str] = []
    tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    tab.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    yield tab
    tab.close()
    assert not problems, problems


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _points(page, selector: str) -> list[tuple[float, float]]:
    return [
        (float(c.get_attribute("data-x")), float(c.get_attribute("data-y")))
        for c in page.locator(f"{selector} circle.pt").all()
    ]


# ------------------------------------------------------------------------------ browser tests


def test_home_lists_everything_and_filters(seeded, page):
    page.goto(seeded + "/")
    rows = page.locator("#live table tbody tr")
    assert rows.count() == 4
    llama = page.locator("tr", has=page.get_by_role("link", name="llama-70b", exact=True))
    assert "Ready" in llama.inner_text() and "h200_sxm" in llama.inner_text()
    assert "TTFT ≤ 500 ms" in llama.inner_text()
    _shot(page, "home")

    page.get_by_label("State").select_option("Failed")
    page.wait_for_url("**state=Failed**")
    states = page.locator("#live table tbody tr").evaluate_all("rows => rows.map(r => r.dataset.state)")
    assert states and set(states) == {"Failed"}  # the DGDR, and the job if its runner already gave up
    assert "too-fast" in page.locator("#live table tbody").inner_text()

    page.goto(seeded + "/?kind=benchmarkjob")
    assert page.locator("#live table tbody tr").count() == 2
    page.get_by_label("Search").fill("measured")  # filters as you type
    assert page.locator("#live table tbody tr:visible").count() == 1


def test_dgdr_page_plan_chart_candidates_and_manifests(seeded, page):
    page.goto(seeded + "/ui/dgdr/default/llama-70b")
    assert page.get_by_role("heading", name="llama-70b", level=1).is_visible()
    assert "Ready" in page.locator("#headline").inner_text()
    predicted = page.locator("#predicted").inner_text()
    assert "Time to first token" in predicted and "500 ms" in predicted and "meets" in predicted
    parts = page.locator("#time-parts").inner_text()  # where the time goes, as stored with the plan
    assert "Time to first token: frontend" in parts and "prefill pass" in parts and "decode step" in parts

    chart = page.locator("svg#pareto-chart")
    assert chart.is_visible()
    points = _points(page, "svg#pareto-chart")
    assert len(points) >= 2 and all(x > 0 and y > 0 for x, y in points)
    assert chart.locator("circle.pt-chosen").count() == 1
    assert chart.locator("rect.region").count() == 1  # the SLA region
    _shot(page, "dgdr")

    # every evaluated candidate, the chosen one and the Pareto ones marked, as the stored results say
    results = json.loads(page.request.get(seeded + DGDRS + "/llama-70b").json()["status"]["profilingResults"])
    stored = [dict(zip(results["candidates"]["columns"], row)) for row in results["candidates"]["rows"]]
    assert len(stored) == results["candidates"]["total"] == results["evaluated"] > len(results["pareto"])
    table = page.locator("table#candidates")
    assert table.locator("tbody tr").count() == len(stored)
    assert table.locator("tr.is-chosen").count() == 1 and "Chosen" in table.locator("tr.is-chosen").inner_text()
    assert table.locator("tr.is-pareto").count() == len(results["pareto"]) == sum(c["pareto"] for c in stored)
    feasible = sum(c["feasible"] for c in stored)
    assert 0 < feasible < len(stored)  # both kinds, so the filter has something to do
    header = table.locator("th", has=page.get_by_role("button", name="TTFT ms"))
    header.get_by_role("button").click()
    assert header.get_attribute("aria-sort") == "ascending"
    cells = table.locator("tbody tr td:nth-child(6)").evaluate_all("els => els.map(e => e.dataset.value)")
    values = [float(v) for v in cells if v]
    assert len(values) >= 2 and values == sorted(values)
    header.get_by_role("button").click()
    assert header.get_attribute("aria-sort") == "descending"
    page.get_by_label("Feasible only").check()  # submits the filter
    page.wait_for_url("**feasible=1**")
    table = page.locator("table#candidates")
    assert table.locator("tbody tr").count() == feasible
    assert set(table.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.feasible)")) == {"1"}
    assert table.locator("tr.is-chosen").count() == 1 and page.get_by_label("Feasible only").is_checked()
    _shot(page, "dgdr-feasible-candidates")
    page.goto(seeded + "/ui/dgdr/default/llama-70b")

    assert "kind: DynamoGraphDeployment" in page.locator("#code-dynamo").inner_text()
    for target, kind in (("ome", "kind: InferenceService"), ("kthena", "kind: ModelServing"), ("kubeai", "kind: Model")):
        page.get_by_role("tab", name=target).click()
        panel = page.locator(f"#panel-{target}")
        assert panel.is_visible() and kind in panel.inner_text()
        assert page.locator("#panel-dynamo").is_hidden()
    page.get_by_role("tab", name="kubeai").press("ArrowLeft")  # keyboard moves between tabs
    assert page.locator("#panel-kthena").is_visible()
    download = page.request.get(seeded + "/ui/dgdr/default/llama-70b/manifests/ome")
    assert download.ok and "attachment" in download.headers["content-disposition"]
    assert "InferenceService" in download.text()


def _online_results(body: dict, folder: Path) -> dict:
    """An online search of ``body`` run in this process against a known truth (the model with other
    parameters: no deployments), as ``profilingResults.online`` stores it."""
    from online_fakes import Everywhere, model_measure, truth_params

    from planner.request import parse_dgdr
    from workers import online

    request = parse_dgdr(body)
    setup = online.Online(database_url=f"sqlite:///{folder / 'study.db'}", target=Everywhere(), target_name="model",
                          runner=None, max_trials=3)
    measure = model_measure(truth_params(), [], request.model)
    result, _, _ = online.profile_online(request, uid="dashboard", generation=1, setup=setup, measure=measure)
    return result.online.model_dump(mode="json", by_alias=True)


def test_dgdr_page_shows_online_trials_next_to_the_offline_prediction(seeded, page, tmp_path):
    from profiler.model.measured import held_out_text, kept_text, uncertainty_text

    body = _dgdr("online-done", ttft=1500, itl=100, model="meta-llama/Llama-3.1-8B-Instruct")
    body["spec"]["gpu"] = {"type": "a100_sxm", "maxNumGPUsPerEngine": 2}
    with httpx.Client(base_url=seeded, timeout=10) as api:
        assert api.post(DGDRS, json=body).status_code == 201
        deadline = time.monotonic() + 60
        while (status := api.get(f"{DGDRS}/online-done").json().get("status") or {}).get("state") != "Ready":
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        # the search's document, as a worker stores it once the DGDR is done
        online = _online_results(body, tmp_path)
        results = {**json.loads(status["profilingResults"]), "online": online}
        patched = api.patch(f"{DGDRS}/online-done/status", content=json.dumps({"status": {"profilingResults": json.dumps(results)}}),
                            headers={"content-type": "application/merge-patch+json"})
        assert patched.status_code == 200, patched.text
    page.goto(seeded + "/ui/dgdr/default/online-done")
    section = page.locator("section[aria-labelledby=online-h]")
    assert f"Offline plan's pick{online['offlinePick']}" in section.locator("dl").inner_text().replace("\n", "")
    # the calibration: the side(s) its scale was kept on, and its errors on the points it held out
    # (none to hold out when the best unit was measured at one load)
    facts = section.locator("dl").inner_text()
    cal = online["calibration"]
    assert set(cal["sides"]) == {"prefill", "decode"} and kept_text(cal["scale"], cal["sides"]) in facts
    assert (held_out_text(cal["heldOut"]) if cal["heldOut"] else "nothing held out (too few points)") in facts
    # and how sure it is of each side's factor
    assert "decode" in cal["uncertainty"] and uncertainty_text(cal["uncertainty"]) in facts
    # one row per run, with its clients
    cells = page.locator("table#trials tbody tr").evaluate_all("rows => rows.map(r => r.cells[2].innerText)")
    assert cells == [str(t["concurrency"]) for t in online["trials"]]
    rows = page.locator("table#trial-predictions tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.innerText))")
    measured = [(t, p) for t in online["trials"] for p in t["points"] or ()]
    assert len(rows) == len(measured) > 0
    for row, (trial, point) in zip(rows, measured):
        offline = next(p for p in trial["predicted"] if p["concurrency"] == point["concurrency"])
        calibrated = next(p for p in trial["calibrated"] if p["concurrency"] == point["concurrency"])
        assert row[:3] == [str(trial["number"]), trial["unit"], str(point["concurrency"])]
        # TTFT: measured, then the offline and calibrated predictions with their signed errors
        assert row[3] == f"{point['ttftMs']:,.0f}"
        for cell, predicted in ((row[4], offline), (row[5], calibrated)):
            error = round((predicted["ttftMs"] / point["ttftMs"] - 1) * 100)
            assert cell == f"{predicted['ttftMs']:,.0f} ({error:+d}%)"
    _shot(page, "dgdr-online")


def test_failed_dgdr_says_why(seeded, page):
    page.goto(seeded + "/ui/dgdr/default/too-fast")
    headline = page.locator("#headline").inner_text()
    assert headline.startswith("Failed at") and "TTFT" in headline
    assert "✗ Failed" in page.locator("#conditions").inner_text()
    assert len(_points(page, "svg#pareto-chart")) >= 1
    assert page.locator("#panel-dynamo").count() == 0  # nothing to deploy
    _shot(page, "dgdr-failed")


def test_benchmarkjob_without_results(seeded, page):
    page.goto(seeded + "/ui/benchmarkjob/default/waiting-job")
    # Queued, running or failed (its endpoint does not exist): either way nothing was measured.
    assert page.locator("#headline").inner_text().startswith(("Not run yet", "Running", "Failed"))
    assert page.locator("#no-results").is_visible()
    _shot(page, "benchmarkjob-waiting")


def test_benchmarkjob_charts_with_sla_lines(seeded, page):
    page.goto(seeded + "/ui/benchmarkjob/default/measured-job")
    assert "Completed" in page.locator("#headline").inner_text()
    for scenario in ("d-100-100", "d-2000-200"):
        for metric in ("ttft", "itl", "tput"):
            points = _points(page, f"svg#chart-{scenario}-{metric}")
            assert {x for x, _ in points} == {1.0, 4.0, 16.0}, (scenario, metric)
        assert page.locator(f"svg#chart-{scenario}-ttft line.rule").count() == 1  # SLA line
        assert page.locator(f"svg#chart-{scenario}-itl line.rule").count() == 1
    raw = page.get_by_role("table", name="Raw numbers, D(100,100)")
    assert raw.locator("tbody tr").count() == 3
    assert page.get_by_role("link", name="genai-bench report").is_visible()
    _shot(page, "benchmarkjob")
    # genai-bench's own files are links served from the job's folder (followed without opening a
    # tab: a bare text file has no icon, and the browser's /favicon.ico 404 would count as an error)
    href = page.get_by_role("link", name="logs/genai-bench.console.log").get_attribute("href")
    got = page.request.get(seeded + href)
    assert got.ok and got.text() == "3 iterations measured\n"
    assert page.get_by_role("link", name="experiment_metadata.json").is_visible()
    href = page.get_by_role("link", name="Measured results and file list (JSON)").get_attribute("href")
    listed = page.request.get(seeded + href).json()
    assert len(listed["results"]) == 6 and [f["path"] for f in listed["files"]] == [
        "experiment_metadata.json", "logs/genai-bench.console.log"]


def test_submit_dgdr_reaches_ready_on_screen(seeded, page):
    page.goto(seeded + "/ui/submit")
    _shot(page, "submit")
    body = _dgdr("from-the-form", ttft=600, itl=25)
    page.locator("#manifest").fill(json.dumps(body, indent=2))
    page.get_by_role("button", name="Submit", exact=True).click()
    page.wait_for_url("**/ui/dgdr/default/from-the-form")
    page.locator(".title-meta .badge", has_text="Ready").wait_for(timeout=60_000)
    page.locator("svg#pareto-chart circle.pt-chosen").wait_for()
    _shot(page, "dgdr-submitted")


def test_submit_invalid_shows_error_next_to_field(seeded, page):
    page.goto(seeded + "/ui/submit")
    page.get_by_role("button", name="Use an example DGDR").click()
    text = page.locator("#manifest").input_value()
    page.locator("#manifest").fill(text.replace("ttft: 300", "ttft: -5").replace("llama-8b-h100", "bad-one"))
    page.get_by_role("button", name="Submit", exact=True).click()
    marked = page.locator(".annotated li.has-error")
    marked.first.wait_for()
    assert marked.count() == 1
    assert "ttft: -5" in marked.locator(".src").inner_text()
    assert "spec.sla.ttft" in marked.locator(".field-error").inner_text()
    assert page.locator("#manifest").get_attribute("aria-invalid") == "true"
    assert page.url.endswith("/ui/submit")
    _shot(page, "submit-invalid")
    with httpx.Client(base_url=seeded) as api:  # nothing was created
        assert api.get(f"{DGDRS}/bad-one").status_code == 404


def test_unknown_object_is_a_page_not_a_crash(seeded):
    assert httpx.get(seeded + "/ui/dgdr/default/nope").status_code == 404
    assert "does not exist" in httpx.get(seeded + "/ui/benchmarkjob/default/nope").text
    css = httpx.get(seeded + "/ui/static/dashboard.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert httpx.get(seeded + "/ui/static/..%2Fhtml.py").status_code == 404


# ------------------------------------------------------------------------------ pure parts


def test_field_line_points_at_the_field_or_its_parent():
    from api.dashboard.submit import field_line

    text = "apiVersion: v1\nspec:\n  sla:\n    ttft: -5\n  scenarios:\n    - a\n    - b\n"
    assert field_line(text, "spec.sla.ttft") == 4
    assert field_line(text, "spec.sla.itl") == 3  # missing: its parent
    assert field_line(text, "spec.scenarios[1]") == 7
    assert field_line("not: [valid", "spec") is None


def test_benchmark_results_read_runner_and_genai_bench_shapes():
    from api.dashboard.bench_results import read_results

    ours = read_results({"details": json.dumps(_measured())}, {"slaplan.io/itl-ms": "15"})
    assert len(ours.runs) == 6 and ours.sla == (None, 15.0)
    assert ours.runs[0].ttft_p99_ms is not None and ours.reports == [("genai-bench report", "https://files.example/x.xlsx")]
    native = read_results({"metrics": [{"aggregated_metrics": {
        "scenario": "D(1,1)", "num_concurrency": 2, "stats": {"ttft": {"mean": 0.1}, "tpot": {"mean": 0.01}},
        "mean_output_throughput_tokens_per_s": 50, "requests_per_second": 1}}]})
    assert native.runs[0].ttft_ms == pytest.approx(100) and native.runs[0].itl_ms == pytest.approx(10)
    runner = read_results({"details": "ran genai-bench", "results": _measured()["results"], "resultsLocation": "/data/x"})
    assert len(runner.runs) == 6 and runner.message == "ran genai-bench"
    assert runner.reports == [("genai-bench results folder", "/data/x")]
    waiting = read_results({"state": "Pending", "details": "queued; waiting for a runner"})
    assert waiting.runs == [] and waiting.message.startswith("queued")


def _runner_details(tmp_path, *, api_key: str | None) -> str:
    """``status.details`` as the runner writes it, offline with no tokenizer cached (so with its
    byte-level tokenizer), its notes made by the runner's own code."""
    from profiler.bench.command import BenchOptions, build_command
    from profiler.bench.runner import choose_tokenizer, runner_settings
    from profiler.bench.spec import parse_benchmarkjob

    spec = parse_benchmarkjob(_job("noted"))
    settings = runner_settings({}, genai_bench="genai-bench", offline=True)
    _, _, tokenizer_notes = choose_tokenizer("org/uncached", settings, {"HF_HUB_CACHE": str(tmp_path / "hub")}, tmp_path)
    command = build_command(spec, "http://127.0.0.1:8000", BenchOptions(
        executable="genai-bench", model_name="m", tokenizer="t", folder_name="f", local_root=str(tmp_path), api_key=api_key))
    return "; ".join(["3 of 3 iteration(s) measured in 90 s", f"results in {tmp_path}/f", *tokenizer_notes, *command.notes])


def test_benchmark_caveats_are_read_from_what_the_runner_records(tmp_path):
    from api.dashboard.bench_caveats import CAVEATS, caveats

    warned = caveats(_runner_details(tmp_path, api_key=None))
    assert len(warned) == 2
    assert "counted in bytes" in warned[0] and "SLAPLAN_BENCH_TOKENIZER" in warned[0]
    assert "placeholder key" in warned[1] and "SLAPLAN_BENCH_API_KEY" in warned[1]
    assert [w for w in caveats(_runner_details(tmp_path, api_key="sk-real")) if "placeholder" in w] == []
    chosen = caveats("1 of 1 iteration(s) measured in 9 s; modelName not given: using 'org/m', the first model the "
                     "endpoint lists; sweep already held results: writing to sweep-2")
    assert chosen == [CAVEATS[2][1].format(model="'org/m'"), CAVEATS[3][1].format(wanted="sweep", folder="sweep-2")]
    assert caveats("3 of 3 iteration(s) measured in 90 s; tokenizer: org/m from the Hugging Face Hub") == []
    assert caveats({"results": []}) == [] and caveats(None) == []


def test_timestamps_have_one_format():
    from datetime import UTC, datetime, timedelta, timezone

    from api.dashboard.html import timestamp

    shown = '<time datetime="2025-01-31T14:05:09Z">2025-01-31 14:05:09 UTC</time>'
    assert timestamp("2025-01-31T14:05:09Z") == shown
    assert timestamp("2025-01-31T15:05:09+01:00") == shown
    assert timestamp(datetime(2025, 1, 31, 14, 5, 9, tzinfo=UTC)) == shown
    assert timestamp(datetime(2025, 1, 31, 16, 5, 9, tzinfo=timezone(timedelta(hours=2)))) == shown
    then = datetime(2025, 1, 31, 14, 5, 9, tzinfo=UTC)
    assert timestamp(then, ago_from=then + timedelta(minutes=5)) == (
        '<time datetime="2025-01-31T14:05:09Z" title="2025-01-31 14:05:09 UTC">5m ago</time>')
    assert timestamp("soon <b>") == "soon &lt;b&gt;" and timestamp(None) == ""


def test_dgdr_and_benchmarkjob_pages_show_times_in_the_one_format():
    from datetime import UTC, datetime

    from api.dashboard.bench_page import render_bench
    from api.dashboard.dgdr_page import render_dgdr
    from infra.resources import Resource

    made = datetime(2025, 1, 31, 14, 0, 0, tzinfo=UTC)
    common = dict(namespace="default", uid="u", generation=1, resource_version=1, labels={}, annotations={},
                  created_at=made, updated_at=made)
    condition = {"type": "Validation", "status": "True", "reason": "Valid", "message": "ok",
                 "lastTransitionTime": "2025-01-31T14:05:09Z"}
    dgdr = Resource(group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
                    plural="dynamographdeploymentrequests", name="d", spec=_dgdr("d")["spec"],
                    status={"state": "Pending", "conditions": [condition]}, **common)
    job = Resource(group="ome.io", version="v1beta1", kind="BenchmarkJob", plural="benchmarkjobs", name="b",
                   spec=_job("b")["spec"], status={"state": "Running", "startTime": "2025-01-31T14:05:09Z"}, **common)
    now = datetime(2025, 1, 31, 15, 0, 0, tzinfo=UTC)
    for html in (render_dgdr(dgdr, now), render_bench(job, now)):
        assert '<time datetime="2025-01-31T14:05:09Z">2025-01-31 14:05:09 UTC</time>' in html
        assert '<time datetime="2025-01-31T14:00:00Z" title="2025-01-31 14:00:00 UTC">1h ago</time>' in html


def test_the_example_benchmarkjob_runs_against_a_local_engine():
    from urllib.parse import urlsplit

    from api.dashboard.submit import EXAMPLE_BENCH, parse_text, target_of
    from profiler.bench.spec import parse_benchmarkjob

    obj, error = parse_text(EXAMPLE_BENCH)
    assert error is None and target_of(obj)[1] is None
    spec = parse_benchmarkjob(obj)
    assert spec.endpoint.inference_service is None  # needs no cluster
    url = urlsplit(spec.endpoint.endpoint.url)
    assert url.hostname == "127.0.0.1"
    start = next(line for line in EXAMPLE_BENCH.splitlines() if "slaplan emulate" in line)
    assert f"--port {url.port}" in start and f"--model {spec.endpoint.endpoint.model_name}" in start


def test_chart_draws_every_point_and_escapes_labels():
    from api.dashboard.charts import Rule, Series, chart

    svg = chart(chart_id="c", title="<t>", description="d", x_label="x", y_label="y",
                series=[Series("s", [(1, 2, "<a>"), (4, 3, "b"), (16, 5, "c")], joined=True)],
                rules=(Rule("y", 4, "SLA"),), log_x=True)
    assert svg.count('class="pt pt-a"') == 3 and "<t>" not in svg and "&lt;a&gt;" in svg
    assert 'class="rule"' in svg


def _stored_plan(*, ttft: float, feasible: bool, reason: str | None = None, x: float = 50.0) -> dict:
    """A plan as the results document stores it (null for an unbounded time)."""
    from planner.types import Engine, Plan
    from profiler.model import Prediction

    predicted = Prediction(ttft_ms=ttft, ttft_p90_ms=ttft, ttft_p99_ms=ttft, itl_ms=15.0, output_tok_s_per_gpu=100.0 - x,
                           tok_s_per_user=x, requests_per_s=1.0, concurrency=8.0)
    engine = Engine(role="aggregated", tp=8, replicas=1, max_batch=8, gpus_per_node=8)
    return Plan(model="meta-llama/Llama-3.1-70B-Instruct", gpu="h200_sxm", backend="vllm", precision="bf16",
                kv_dtype="bf16", memory_fraction=0.9, mode="agg", engines=(engine,), predicted=predicted,
                feasible=feasible, reason=reason).stored()


def test_chart_markers_follow_the_tables_feasibility_and_skip_unbounded_points():
    from api.dashboard.plan_view import candidates_section, chosen_section, pareto_section
    from planner.results import ResultsParts

    over_budget = _stored_plan(ttft=200.0, feasible=False, reason="needs 16 GPUs, over the budget of 8", x=40.0)
    unbounded = _stored_plan(ttft=float("inf"), feasible=False, reason="misses the SLA", x=60.0)
    assert unbounded["predicted"]["ttftMs"] is None
    doc = ResultsParts.read({
        "feasible": False, "sla": {"ttftMs": 500, "itlMs": 20, "islTokens": 3000, "oslTokens": 500}, "chosen": None,
        "pareto": [over_budget, unbounded], "closest": over_budget, "reason": "needs 16 GPUs",
        "candidates": {"columns": ["mode", "engines", "totalGpus", "ttftMs", "itlMs", "tokPerSecPerUser",
                                   "outputTokPerSecPerGpu", "requestsPerSec", "costPerHour", "feasible", "reason",
                                   "pareto", "chosen"],
                       "rows": [["agg", [["aggregated", 1, 8, 1, 1, 1]], 8, None, 15.0, 60.0, 40.0, 1.0, None, False,
                                 "misses the SLA", False, False]],
                       "total": 1, "omitted": 0}})
    assert doc is not None and len(doc.pareto) == 2 and doc.candidates is not None
    svg = pareto_section(doc)
    assert 'data-series="Pareto candidate, not feasible"' in svg and 'data-series="Pareto candidate, feasible"' not in svg
    assert svg.count('class="pt ') == 1, "the unbounded point is not drawn"
    table = candidates_section(doc)
    assert "unbounded" in table and 'data-feasible="0"' in table
    assert 'id="closest"' in chosen_section(doc) and "TTFT 200.0 ms" in chosen_section(doc)


def test_a_mix_of_shapes_is_labelled_as_the_mix_on_the_page_and_in_the_list():
    from datetime import UTC, datetime

    from api.dashboard.dgdr_page import render_dgdr
    from api.dashboard.home import Filters, render_home
    from infra.resources import Resource
    from planner import plan
    from planner.manifests.dynamo import render_dgd
    from planner.status import dgdr_status
    from planner.types import PlanRequest

    request = PlanRequest(name="mix", model="meta-llama/Llama-3.1-70B-Instruct", gpu="h200_sxm", ttft_ms=500,
                          itl_ms=20, isl_tokens=3000, osl_tokens=500, total_gpus=12)
    result = plan(request)
    chosen = result.chosen
    assert chosen.parts  # 12 H200: one TP8 and one TP4 engine
    label = " + ".join(f"{e.replicas}×TP{e.tp}" for e in chosen.engines)
    status = dgdr_status(result, render_dgd(chosen, request), observed_generation=1, state="Ready",
                         now="2025-01-31T14:05:09Z")
    made = datetime(2025, 1, 31, 14, 0, 0, tzinfo=UTC)
    dgdr = Resource(group="nvidia.com", version="v1alpha1", kind="DynamoGraphDeploymentRequest",
                    plural="dynamographdeploymentrequests", name="mix", spec=_dgdr("mix")["spec"], status=status,
                    namespace="default", uid="u", generation=1, resource_version=1, labels={}, annotations={},
                    created_at=made, updated_at=made)
    now = datetime(2025, 1, 31, 15, 0, 0, tzinfo=UTC)
    page = render_dgdr(dgdr, now)
    assert f"The planner chose {label} on 12 " in page
    assert f"Mix of aggregated engine shapes ({label})" in page
    row = page[page.index('aria-label="chosen plan"'):]
    row = row[:row.index("</tr>")]
    assert f">{label}</td>" in row and "aggregated</td>" not in row.replace(">agg</td>", "")  # the mix, not a shape
    listed = render_home([dgdr], [], Filters(), now)
    assert f'<td class="plan">{label}</td>' in listed
