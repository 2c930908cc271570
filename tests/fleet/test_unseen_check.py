"""The unseen check: the package's own sample of serving runs, scored at each run's engine.
The sample holds every reference run (1,112 of its 3,733 scored rows: the fits read them), so the
bars are checked on the other 2,621, which no fit reads (``farebox score ... --seen``). Coverage of
the rows that record their deployment meets the issue's bar; the error bars are not met yet and
stay as strict expected failures, so meeting one is noticed (docs/calibration.md, the unseen
check)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.perf.measured import WORKER_COUNTS
from fleet.perf.score import Score, score
from tests.fleet.kernel_data import WHEEL, needs_data
from tests.fleet.measured_runs import MEASURED_CSV, needs_runs

SAMPLE = WHEEL / "aiconfigurator_core" / "systems" / "silicon_sample.csv"
BARS = {"tpot": 0.12, "tput": 0.12, "ttft": 0.30}
"""Issue 9's targets on unseen runs: median absolute error of TPOT and tokens/s per device, TTFT."""


@pytest.fixture(scope="module")
def sample(catalog: Catalog) -> Score:
    return score(catalog, Path(SAMPLE), seen=MEASURED_CSV if MEASURED_CSV.is_file() else None)


def _median(result: Score, figure: str, *, unseen_only: bool = False) -> float:
    s = result.scored
    model, measured = getattr(s, figure), getattr(s, f"measured_{figure}")
    keep = ~s.seen if unseen_only else np.ones(len(s.line), dtype=bool)
    return float(np.median(np.abs(model[keep] / measured[keep] - 1.0)))


@needs_data
@needs_runs
def test_the_sample_holds_every_reference_run(sample: Score) -> None:
    """Each of the 1,112 reference runs is a row of the sample (the same measurement,
    ``fleet.perf.seen``), and every one of them is scored."""
    assert int(sample.scored.seen.sum()) == 1112
    assert len(sample.scored.line) - int(sample.scored.seen.sum()) == 2621


@needs_data
def test_mtp_runs_are_scored_with_their_draft_or_named(sample: Score) -> None:
    """InferenceX's DeepSeek-R1 MTP runs on B200 (their image,
    fleet.perf.serving_recipes.mtp_draft): the 66 that drafted 3 tokens are counted under that
    reason (no published acceptance), the 22 with data-parallel attention drafted 1 and are
    scored with the catalog's acceptance."""
    mtp = [u for u in sample.uncovered if u[1] == "MTP draft of 3 tokens"]
    assert len(mtp) == 66


@needs_data
def test_rows_that_record_their_deployment_are_covered(sample: Score) -> None:
    """At least 90% of the rows that say what ran are scored; the rows without a disaggregated
    deployment's worker counts are counted under that reason, not guessed."""
    unrecorded = [u for u in sample.uncovered if all(c in u[1] for c in WORKER_COUNTS)]
    assert len(unrecorded) > 1000  # the sample's disaggregated rows without worker counts
    recorded = sample.rows - len(unrecorded)
    assert len(sample.scored.line) / recorded >= 0.90


@needs_data
def test_the_figures_hold_where_they_are(sample: Score) -> None:
    """Not the bars: the medians measured on 2026-11-24 (13.1% TPOT, 12.8% tokens/s per GPU,
    31.8% TTFT), not to lose more than a point of. Since InferenceX's runs are read at their
    drawn lengths (fleet.perf.protocol, same day) they read 13.0% / 12.9% / 32.4%; since
    MiniMax-M2's attention pays its q/k norms' all-reduce (``Model.qk_norm_across_heads``,
    2026-11-24, later) 12.9% / 12.3% / 31.9%; since INT4 experts on Blackwell transfer by their
    own kernel 12.8% / 12.2% / 31.9%; since each engine's MoE kernels take their own prefill time
    (``EngineFactors.expert_prefill_time``) 12.7% / 12.2% / 31.1%. The 2,687 rows no fit reads
    (the reference runs set apart) read 13.9% / 14.2% / 35.1%, then 13.7% / 14.2% / 33.8%
    (33.9% TTFT once TensorRT-LLM's reference rows were its gated kernels only; 33.7% since MoE
    layers pay their routing skew, fleet.perf.kernel_moe_skew), not to lose more than a point of
    either. Since InferenceX's SGLang runs poll for new requests at their recipes' interval
    (fleet.perf.serving_recipes.SGLANG_RECV_RULES) the TTFT medians read 29.3% over all rows
    and 30.9% over the unseen ones; since InferenceX's DeepSeek-R1 MTP runs are known by their
    image (fleet.perf.serving_recipes.mtp_draft; 66 not scored, 22 scored with their 1-token
    draft) all rows read 12.4% / 11.9% / 29.3% and the 2,621 unseen ones 13.3% / 13.5% / 31.0%;
    since InferenceX's TensorRT-LLM runs hold new prompts as their recipes say
    (fleet.perf.serving_recipes.trtllm_hold) the TTFT medians read 29.1% and 30.7%; since the
    DeepSeek-R1 FP8 B200 recipe's MoE backend is read (serving_recipes.trtllm_moe_backend) all
    rows read 12.3% / 11.8% / 29.2% and the unseen ones 13.2% / 13.3% / 30.8%; since the MoE
    streaming and call terms are fitted on decode-sized calls (fleet.perf.kernel_fit.fit_moe,
    with the Hopper and engine re-fits after it) all rows read 11.7% / 11.6% / 29.2% and the
    unseen ones 12.6% / 13.2% / 30.6%; since the routed experts' prefill compute follows the
    measured MoE form (``fleet.perf.kernel_moe_efficiency``, 2026-11-25, with the re-fits after
    it) all rows read 12.1% / 11.7% / 27.7% and the unseen ones 13.0% / 12.9% / 29.6%; since vLLM's
    and SGLang's grouped GEMMs follow forms of their own (``EngineFactors.moe_compute``, same
    day, with the engine re-fit after it) 11.6% / 11.4% / 26.6% and 12.3% / 12.5% / 27.3%; since
    INT4 weight-only experts follow their measured compute form (``moe_compute.int4``, same day)
    11.5% / 11.2% / 25.0% and 12.2% / 12.2% / 25.1%; since TensorRT-LLM's weight-only 4-bit
    experts pay its fitted W4A16 call (``EngineFactors.moe_w4a16_call_us``, 2026-11-25, with the
    engine re-fit) 11.0% / 10.9% / 25.1% and 12.0% / 12.1% / 25.4%."""
    assert _median(sample, "tpot") <= 0.110 + 0.01
    assert _median(sample, "tput") <= 0.109 + 0.01
    assert _median(sample, "ttft") <= 0.251 + 0.01
    if sample.scored.seen.any():
        assert _median(sample, "tpot", unseen_only=True) <= 0.120 + 0.01
        assert _median(sample, "tput", unseen_only=True) <= 0.121 + 0.01
        assert _median(sample, "ttft", unseen_only=True) <= 0.254 + 0.01


_SHORT = pytest.mark.xfail(
    strict=True,
    reason="known gap: on the sample's 2,621 rows no fit reads the median tokens/s per GPU error "
    "is 12.1% against the 12% bar (10.9% with the 1,112 reference runs in; docs/calibration.md, "
    "the unseen check)",
)


@needs_data
@needs_runs
@pytest.mark.parametrize(
    "figure",
    ["tpot", pytest.param("tput", marks=_SHORT), "ttft"],
)
def test_unseen_medians_within_the_bars(sample: Score, figure: str) -> None:
    """Issue 9's bars on the runs no fit reads. TTFT meets its 30% since the routed experts'
    prefill compute follows the measured MoE form (29.6%; 30.6% before; 27.3% since vLLM's and
    SGLang's own forms; 25.1% since INT4 weight-only experts' form). TPOT meets its 12% since
    TensorRT-LLM's W4A16 call term (11.99%, from 12.2%: at the bar, with no room)."""
    assert _median(sample, figure, unseen_only=True) <= BARS[figure]


@needs_data
@needs_runs
def test_no_large_class_bias_on_unseen_runs(sample: Score, catalog: Catalog) -> None:
    """The class biases plans once carried as warnings stay gone: the MoE models' median signed
    TTFT error on the runs no fit reads (-24.6% over 2,328 runs before the MoE compute form,
    -1.4% since, -6.3% since each engine's own MoE form, -3.5% since INT4 experts' form, -4.2% since
    TensorRT-LLM's W4A16 call term) and the throughput of runs at 65 or more users (+18.1% over
    539 runs before, +4.7% since, +7.2% since the engines' forms, +7.8% since the W4A16 call
    term) are within 10%."""
    s = sample.scored
    moe = np.asarray([catalog.models[m].moe is not None for m in s.model.tolist()]) & ~s.seen
    assert int(moe.sum()) > 2000
    assert abs(float(np.median(s.ttft[moe] / s.measured_ttft[moe] - 1.0))) <= 0.10
    large = (s.concurrency >= 65) & ~s.seen
    assert int(large.sum()) > 500
    assert abs(float(np.median(s.tput[large] / s.measured_tput[large] - 1.0))) <= 0.10
