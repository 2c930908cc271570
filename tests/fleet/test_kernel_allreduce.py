"""The engines' measured all-reduce curves (``fleet.perf.kernel_allreduce``) and what
docs/calibration.md reads from them: at decode-size messages every engine's kernel takes a
fraction of what the model's pooled all-reduce form charges."""

from __future__ import annotations

import math

import pytest

from fleet.perf import kernel_allreduce as ka
from fleet.perf.arrays import AcceleratorArrays, CatalogArrays
from fleet.perf.kernel_engines import ENGINES
from tests.fleet.kernel_data import kernel_data, needs_data


@pytest.fixture(scope="module")
def acc(arrays: CatalogArrays) -> AcceleratorArrays:
    return arrays.accelerators


def test_grid_spans_the_tables_sizes() -> None:
    # 128 to 2^29 BF16 elements
    assert ka.MESSAGE_BYTES[0] == 128 * ka.BF16_BYTES
    assert ka.MESSAGE_BYTES[-1] == 2**29 * ka.BF16_BYTES
    assert all(b == 2 * a for a, b in zip(ka.MESSAGE_BYTES, ka.MESSAGE_BYTES[1:], strict=False))


def test_derived_8_adds_the_pooled_forms_step_from_4_to_8(acc: AcceleratorArrays) -> None:
    four = tuple(10.0 for _ in ka.MESSAGE_BYTES)
    eight = ka.derived_8(four, acc, "gb200")
    step = [
        ka.pooled_us(acc, "gb200", 8, b) - ka.pooled_us(acc, "gb200", 4, b)
        for b in ka.MESSAGE_BYTES
    ]
    assert [e - 10.0 for e in eight] == pytest.approx(step)


def test_pooled_form_is_the_models_all_reduce(acc: AcceleratorArrays) -> None:
    # 2 log2(n) hops + the call cost + 2 (n-1)/n bytes over the link
    i = acc.ids.index("h100-sxm")
    hop_us, call_us = acc.scale_up_latency_s[i] * 1e6, acc.collective_overhead_s[i] * 1e6
    small = ka.pooled_us(acc, "h100-sxm", 8, 256)
    large = ka.pooled_us(acc, "h100-sxm", 8, 2**30)
    link = acc.scale_up_bytes_per_s[i] * acc.link_fraction[i]
    assert small == pytest.approx(6 * hop_us + call_us + 1.75 * 256 / link * 1e6)
    assert (large - small) / (2**30 - 256) == pytest.approx(1.75 / link * 1e6)


@needs_data
def test_every_engine_has_a_curve_on_hopper_and_blackwell(acc: AcceleratorArrays) -> None:
    data = kernel_data()
    assert data is not None
    for part in ("h100-sxm", "h200-sxm", "b200", "b300", "gb200"):
        for engine in ENGINES:
            c = ka.curve(data, part, engine, acc)
            assert c is not None, (part, engine)
            assert c.measured_8 == (part != "gb200"), (part, engine)
            for n in ka.GPUS:
                assert len(c.us[n]) == len(ka.MESSAGE_BYTES)
                assert all(t > 0 and math.isfinite(t) for t in c.us[n])
                # the largest message costs far more than the smallest: bandwidth-bound there
                assert c.us[n][-1] > 20 * c.us[n][0], (part, engine, n)


@needs_data
def test_kernels_take_a_fraction_of_the_pooled_form_at_decode_sizes(acc: AcceleratorArrays) -> None:
    """At 8-64 KiB (a decode step's activations) the pooled form charges 16-28 us per call on
    Hopper and Blackwell; every engine's kernel takes 2.5-11 us (docs/calibration.md). On 8
    Hopper GPUs: the pooled form 24.3 us at 8 KiB, TensorRT-LLM's kernel 3.5, vLLM's 5.1,
    SGLang's 3.6."""
    data = kernel_data()
    assert data is not None
    for part in ("h100-sxm", "h200-sxm", "b200", "b300"):
        for engine in ENGINES:
            c = ka.curve(data, part, engine, acc)
            assert c is not None
            for n in ka.GPUS:
                for b in (8 * 1024, 64 * 1024):
                    assert c.at(n, b) < 0.5 * ka.pooled_us(acc, part, n, b), (part, engine, n, b)
    c = ka.curve(data, "h100-sxm", "trtllm", acc)
    assert c is not None
    assert c.at(8, 8 * 1024) == pytest.approx(3.5, abs=0.3)
    assert ka.pooled_us(acc, "h100-sxm", 8, 8 * 1024) == pytest.approx(24.3, abs=0.5)


@needs_data
def test_cli_prints_every_part_with_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert ka.main([]) == 0
    out = capsys.readouterr().out
    for part in ("h100-sxm", "b200", "gb200"):
        assert f"{part:20s} model" in out
    assert "(derived from 4 GPUs)" in out
