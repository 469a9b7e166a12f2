"""The power-of-two pairs of ``bench cliffs`` (no timing is asserted)."""

import json

import numpy as np
import pytest

from ort_ascend_ops.__main__ import main
from ort_ascend_ops.bench import BENCHES, cliffs
from ort_ascend_ops.bench.rotary_position_embedding import MODES
from ort_ascend_ops.bench.runner import DTYPES

NORM_WIDTHS = {(2048, 2112), (4096, 4160), (8192, 8256)}
HEAD_DIMS = {(64, 72), (128, 136)}
WIDTHS = {
    "rms_norm": NORM_WIDTHS,
    "rms_norm_grad": NORM_WIDTHS,
    "rotary_position_embedding": HEAD_DIMS,
    "rotary_position_embedding_grad": HEAD_DIMS,
    "lightning_indexer": {(128, 136)},
    "lightning_indexer_grad": {(128, 136)},
    "flash_attention_score": {(128, 136)},
    "flash_attention_score_grad": {(128, 136)},
    "swi_glu": {(4096, 4160), (8192, 8256)},
    "swi_glu_grad": {(4096, 4160), (8192, 8256)},
}
QUICK = {(4096, 4160), (128, 136)}
# ApplyAdamW and NonFiniteCheckAndUnscale walk their tensors as one flat array: no row width to
# fall off a cliff.
FLAT = {"apply_adam_w", "non_finite_check_and_unscale"}
# GroupedMatmul and its weight grad: no power-of-two pairs in cliffs.py yet.
WITHOUT_PAIRS = {"grouped_matmul", "grouped_matmul_weight_grad"}


@pytest.fixture
def make_pair(monkeypatch):
    """Both cases of a pair, inputs zero-filled (untouched pages): full sizes cost nothing."""
    for module in BENCHES.values():
        if hasattr(module, "random"):
            monkeypatch.setattr(module, "random", lambda shape, dtype, rng: np.zeros(shape, DTYPES[dtype]))
    return lambda pair: [BENCHES[pair.bench].make(params) for params in (pair.power, pair.neighbour)]


def _width(case) -> int:
    return int(cliffs.shape(case).rsplit("x", 1)[1])


@pytest.mark.parametrize("quick", [False, True])
def test_pairs_have_the_widths_asked(quick, make_pair):
    dtypes = ["float32", "bfloat16"]
    keys = []
    for pair in cliffs.pairs(quick, dtypes):
        power, neighbour = make_pair(pair)
        keys.append((pair.bench, (_width(power), _width(neighbour)), power.dtype, pair.variant))
    widths = {name: {w for w in pairs if not quick or w in QUICK} for name, pairs in WIDTHS.items()}
    modes = set(MODES.values())
    variants = {name: {""} for name in BENCHES} | {
        "rotary_position_embedding": modes,
        "rotary_position_embedding_grad": modes | {mode + " +x" for mode in modes},
    }
    # Every width of every bench in every dtype and, for RoPE, every mode (the grad with and
    # without x), once.
    assert set(BENCHES) == set(WIDTHS) | FLAT | WITHOUT_PAIRS
    assert sorted(keys) == sorted(
        (name, w, dtype, variant)
        for name in WIDTHS
        for w in widths[name]
        for dtype in dtypes
        for variant in variants[name]
    )


def test_a_pairs_cases_differ_in_the_width_alone(make_pair):
    for pair in cliffs.pairs(False, list(DTYPES)):
        power, neighbour = make_pair(pair)
        assert (power.op, power.dtype, power.attrs) == (neighbour.op, neighbour.dtype, neighbour.attrs), pair
        w_power, w_neighbour = cliffs.work(power), cliffs.work(neighbour)
        if power.flops is None:  # elements: the other dims make up for the width
            assert w_neighbour / w_power == pytest.approx(1, abs=0.01), pair
        else:  # the indexer's FLOPs grow with the head dim, the rest of its shape is the same
            assert w_neighbour / w_power == _width(neighbour) / _width(power), pair


def test_quick_cliffs_write_json_and_markdown(tmp_path, capsys):
    out, md = tmp_path / "cliffs.json", tmp_path / "cliffs.md"
    argv = ["bench", "cliffs", "--quick", "--threads", "1", "--dtypes", "float32", "--json", str(out)]
    assert main([*argv, "--markdown", str(md)]) == 0  # whatever the ratios
    rows = json.loads(out.read_text())["cliffs"]
    assert len(rows) == len(cliffs.pairs(True, ["float32"]))
    assert all(r["power_s"] > 0 and r["neighbour_s"] > 0 and r["limit"] == cliffs.RATIO_LIMIT for r in rows)
    passed = sum(r["passed"] for r in rows)
    assert f"cliffs: {passed} of {len(rows)} pairs within {cliffs.RATIO_LIMIT}x" in capsys.readouterr().out
    text = md.read_text()
    assert "### Cliffs" in text and "| RmsNorm | float32 | - | 1 | 64x4096 |" in text
