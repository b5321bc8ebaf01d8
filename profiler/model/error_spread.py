"""How far off the model is, measured held out (pure data).

The log-sd of the model's error (ln measured / predicted) of the mean TTFT and TPOT within one
workload: ``SPREAD_BETWEEN`` deployments (each deployment's median over its loads, around the workload's)
and ``SPREAD_WITHIN`` one deployment (its runs at other loads around its median: the model's shape errors
across load and the measurement noise). Measured by ``benchmarks/online_replay.py --spread``: the
model fitted without one GPU type, on that type's workloads (B200, B300, H100 in turn), pooled.
"""

from __future__ import annotations

SPREAD_BETWEEN = {"ttft": 0.385, "tpot": 0.100}
SPREAD_WITHIN = {"ttft": 0.350, "tpot": 0.071}
