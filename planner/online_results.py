"""What an online search leaves in the profiling results (``profilingResults.online``), typed.

Shape (camelCase keys; times in ms, throughputs in output tokens/s)::

    online:
      study: dgdr-<uid>-1                # the Optuna study that holds the trials
      target: local emulator             # where the units ran
      budget: {maxTrials: 8, maxWallTimeMinutes: 240}
      sweep: {scenario: "D(3000,500)", concurrency: [1, 4, 16]}   # the clients a run may use
      trialsDone: 3                      # trials (runs) that used the budget
      stopped: "converged: ..."          # why the search ended
      best: "agg tp2"                    # the unit measured best
      score: "output tokens/s per GPU ..."
      calibration: {unit, scale, sides: {prefill, decode}, fitted: [...], points, harnessMs,
                    before: {ttft_mdape_pct, tpot_mdape_pct}, after: {...}, heldOut: {ttft_start, ...}}
      leftOut: ["..."]                   # why some units could not be deployed on the target
        offlinePick: "agg tp1"             # the unit the offline plan chose, which the search replaced
      trials: [{number, unit, concurrency, state, gpus, score, meetsSla, points: [{concurrency, ttftMs, itlMs,
               outputTokPerSec}], predicted: [...], calibrated: [...], error, resultsLocation}, ...]

A trial is one run: a unit at ``concurrency`` clients. Its ``score``, ``meetsSla`` and ``points``
(the run's one point; every sweep point in trials stored before runs were trials of their own,
which have no ``concurrency``) are there once it completed, with ``predicted`` (the offline
model's prediction of the same points, which the measurement replaced) and ``calibrated`` (the
calibrated model's); ``error`` when it failed on its own. Trials are read one by one (``planner.stored.Items``): a trial of another shape
is left out and the others still read.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from planner.stored import Items, Stored

__all__ = ["SCORE", "Calibration", "CalibrationErrors", "MeasuredPoint", "OnlineSearch", "SearchBudget", "Sweep",
           "Trial"]

SCORE = ("output tokens/s per GPU of the run within the SLA; negative: the smallest ratio by which "
         "it misses it")


class SearchBudget(Stored):
    """How much the search may measure."""

    max_trials: int = Field(alias="maxTrials", description="runs measured at most")
    max_wall_minutes: float = Field(alias="maxWallTimeMinutes", description="wall time of the search, minutes")


class Sweep(Stored):
    """How runs are measured: one genai-bench scenario, at one of these concurrencies each."""

    scenario: str = Field(description="genai-bench traffic scenario, D(isl,osl)")
    concurrency: tuple[int, ...] = Field(description="closed-loop clients a run may use")


class MeasuredPoint(Stored):
    """Means over the requests of one measurement at one concurrency."""

    concurrency: int
    ttft_ms: float = Field(alias="ttftMs")
    itl_ms: float = Field(alias="itlMs")
    output_tok_s: float = Field(alias="outputTokPerSec", description="output tokens/s of the whole unit")


class Trial(Stored):
    """One run: a unit deployed and benchmarked at one concurrency (or being, or failed)."""

    number: int
    unit: str | None = Field(default=None, description="the unit's key; None before the trial started")
    concurrency: int | None = Field(default=None, description="the run's closed-loop clients; None before the trial "
                                                              "started, and in trials that measured a whole sweep")
    state: Literal["running", "waiting", "complete", "fail"]
    gpus: int | None = None
    score: float | None = Field(default=None, description="see OnlineSearch.score")
    meets_sla: bool | None = Field(default=None, alias="meetsSla")
    points: tuple[MeasuredPoint, ...] | None = None
    predicted: tuple[MeasuredPoint, ...] | None = Field(
        default=None, description="the offline model's prediction of the same points (what the search started from)")
    calibrated: tuple[MeasuredPoint, ...] | None = Field(
        default=None, description="the calibrated model's prediction of the same points")
    error: str | None = None
    results_location: str | None = Field(default=None, alias="resultsLocation", description="genai-bench's folder")
    reused_from: str | None = Field(default=None, alias="reusedFrom",
                                    description="the DGDR (namespace/name) that measured this run, when it was "
                                                "reused rather than measured again")


class CalibrationErrors(Stored):
    """Median absolute percentage errors of the model on the measured points (%)."""

    ttft_mdape_pct: float
    tpot_mdape_pct: float


class Calibration(Stored):
    """How the model was calibrated on the measured runs of the best run's unit."""

    unit: str
    scale: float = Field(description="the uniform time factor found first")
    sides: dict[str, float] = Field(
        default_factory=dict, description="the time factor kept on each side of the model (prefill: sets TTFT; "
                                          "decode: sets TPOT), 1 where the held-out points did not support it; "
                                          "empty in documents written before it was recorded")
    fitted: tuple[str, ...] = Field(description="parameters refined after scaling")
    points: int = Field(description="measured points fitted")
    harness_ms: float = Field(default=0.0, alias="harnessMs",
                              description="what genai-bench added to each measured TTFT, ms: held apart from "
                                          "the engine")
    before: CalibrationErrors
    after: CalibrationErrors
    held_out: dict[str, float] = Field(
        default_factory=dict, alias="heldOut",
        description="mean absolute log error of TTFT and TPOT on the points held out, per step judged "
                    "(``ttft_start``, ``tpot_scaled``, …: profiler.model.measured.DeploymentFit.held_out)")
    uncertainty: dict[str, float] = Field(
        default_factory=dict, description="one standard error of each side's factor and of each parameter "
                                          "refined, as a factor (1.1: ±10%; DeploymentFit.uncertainty)")


class OnlineSearch(Stored):
    """The search's budget, how it ended, the calibration and every trial."""

    profiling: str = Field(default="online (thorough)", description="which profiling ran, as the condition says it")
    study: str
    target: str = Field(description="where the units were deployed")
    budget: SearchBudget
    sweep: Sweep
    trials_done: int = Field(alias="trialsDone", description="trials (runs) that used the budget")
    trials_reused: int = Field(default=0, alias="trialsReused",
                               description="runs reused from earlier DGDRs of the workload (none of the budget)")
    stopped: str = Field(description="why the search ended")
    best: str = Field(description="the unit of the best run")
    score: str = Field(default=SCORE, description="what a trial's score is")
    calibration: Calibration
    left_out: tuple[str, ...] = Field(default=(), alias="leftOut", description="why units could not be deployed")
    offline_pick: str | None = Field(default=None, alias="offlinePick",
                                     description="the unit the offline plan chose (None: it found none)")
    trials: Items[Trial] = ()
