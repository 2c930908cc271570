"""Which lengths a serving-log row's closed-loop benchmark sent: fixed, or drawn from a range.

The model's closed-loop figures (``tpot_burst_s``, ``ttft_burst_s``) depend on it
(``fleet.perf.closed_loop``): drawn lengths end a wave's requests apart, so later waves arrive
staggered under any scheduler, and the requests' mean lengths are the range's means, not the
nominal ones the log records. Logs rarely say which. A row's range ratio r (every prompt and output
length uniform on the integers [int(r L), L], as vLLM's ``benchmark_serving.py`` random dataset
draws them; r = 1: fixed), in order:
1. its own ``random_range_ratio`` column, where the log has one;
2. 0.8 for a result of InferenceX (SemiAnalysis' open benchmark): its benchmark workflow templates
   set ``RANDOM_RANGE_RATIO: 0.8`` (SemiAnalysisAI/InferenceX,
   ``.github/workflows/benchmark-tmpl.yml`` and ``benchmark-multinode-tmpl.yml``) for its client,
   ``kimbochen/bench_serving`` ``benchmark_serving.py``, whose ``sample_random_requests`` draws
   ``randint(int(L * r), L + 1)`` with ``--ignore-eos``. aiconfigurator-core's logs carry
   InferenceX results with their record in ``silicon_data_source``: a run of its benchmark
   workflow (``workflow_run_id=``) or a row of its published results export (``wip=``, the
   export's work-in-progress flag; these rows name models as its dashboard does, e.g.
   ``model=GPT-OSS-120B``, and carry its serving images);
3. otherwise 1 (fixed lengths).

What each InferenceX run's server was told beyond the logged deployment (its scheduler's poll
interval, an MTP draft, held prompts) is read from its recipe by ``fleet.perf.serving_recipes``.

InferenceX also sends ten prompts per unit of concurrency (``--num-prompts $((CONC * 10))``);
the model keeps its fitted ``closed_loop.BENCHMARK_WAVES`` for every log (docs/calibration.md has
the measurement with ten waves for these rows, which reads the held-out runs worse).
"""

from __future__ import annotations

from collections.abc import Mapping

INFERENCEX_RANGE_RATIO = 0.8
"""InferenceX's ``RANDOM_RANGE_RATIO`` (module docstring)."""
INFERENCEX_MARKERS = ("workflow_run_id=", "wip=")
"""``silicon_data_source`` fields that mark an InferenceX result (module docstring)."""


def mean_length(nominal: int, range_ratio: float) -> int:
    """Mean of a length drawn uniformly from the integers [int(range_ratio x nominal), nominal],
    rounded half up (``nominal`` itself when the ratio is 1)."""
    low = int(nominal * range_ratio)
    return (low + nominal + 1) // 2


def range_ratio(row: Mapping[str, str]) -> float:
    """The row's range ratio (module docstring); ``ValueError`` on an unreadable number or one
    outside (0, 1]."""
    text = (row.get("random_range_ratio") or "").strip()
    if text:
        try:
            ratio = float(text)
        except ValueError:
            raise ValueError(f"random_range_ratio {text!r} is not a number") from None
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"random_range_ratio {ratio:g} is not in (0, 1]")
        return ratio
    source = row.get("silicon_data_source") or ""
    return INFERENCEX_RANGE_RATIO if any(m in source for m in INFERENCEX_MARKERS) else 1.0
