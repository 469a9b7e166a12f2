"""Run by the tests of the capped ISA paths (harness.assert_capped_isa_matches_oracle) in a process
whose ORT_ASCEND_OPS_ISA caps the kernels' paths (baseline: the plain loops; avx2: no AVX-512): the
native kernels of each family named on the command line, through those paths, against the
oracles. Exits non-zero on the first mismatch."""

import sys

import numpy as np

from cases.flash_attention_score import check_stats
from cases.flash_attention_score_grad import magnitude
from engines import run
from fuzzing import close
from lightning_indexer_checks import MODES, check_forward, forward_inputs
from oracles import (
    BF16,
    F32,
    GMM_CASES,
    PAIRS,
    ROPE_LAYOUTS,
    ROPE_MODES,
    TOL,
    assert_close,
    flash_attention_grad_oracle,
    flash_attention_inputs,
    flash_attention_oracle,
    grouped_matmul_inputs,
    grouped_matmul_oracle,
    grouped_matmul_weight_grad_oracle,
    lightning_indexer_grad_inputs,
    rms_norm_grad_oracle,
    rms_norm_oracle,
    rope_grad_oracle,
    rope_oracle,
)


def check_rms_norm_family(rng):
    for t, tg in PAIRS:
        x = rng.standard_normal((9, 333)).astype(t)
        gamma = rng.standard_normal(333).astype(tg)
        y, rstd = run("native", "RmsNorm", {"x": x, "gamma": gamma}, {"epsilon": 1e-6})
        y_ref, rstd_ref = rms_norm_oracle(x, gamma, 1e-6)
        assert_close(y, y_ref, TOL[t])
        assert_close(rstd, rstd_ref, TOL[F32])
        dy = rng.standard_normal(x.shape).astype(t)
        inputs = {"dy": dy, "x": x, "rstd": rstd, "gamma": gamma}
        dx, dgamma = run("native", "RmsNormGrad", inputs)
        dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
        assert_close(dx, dx_ref, TOL[t])
        assert_close(dgamma, dgamma_ref, TOL[F32])


def check_rope_family(rng):
    for t in {t for t, _ in PAIRS}:
        for mode in ROPE_MODES:
            for _, shape, table_shape in ROPE_LAYOUTS[::3]:
                x, dy = (rng.standard_normal(shape).astype(t) for _ in range(2))
                cos, sin = (rng.standard_normal(table_shape).astype(t) for _ in range(2))
                (y,) = run(
                    "native", "RotaryPositionEmbedding", {"x": x, "cos": cos, "sin": sin}, {"mode": mode}
                )
                assert_close(y, rope_oracle(x, cos, sin, mode), TOL[t])
                inputs = {"dy": dy, "cos": cos, "sin": sin, "x": x}
                outputs = run("native", "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
                for out, ref in zip(outputs, rope_grad_oracle(**inputs, mode=mode), strict=True):
                    assert_close(out, ref, 2 * TOL[t])


def check_grouped_matmul_family(rng):
    """bfloat16 only: the products whose path changes with the ISA (see gemm_bf16)."""
    for counts, k, n in GMM_CASES:
        for tw in (0, 1):
            inputs = grouped_matmul_inputs(rng, counts, k, n, BF16, tw)
            forward = {name: inputs[name] for name in ("x", "weight", "group_list")}
            (y,) = run("native", "GroupedMatmul", forward, {"transpose_weight": tw})
            assert_close(y, grouped_matmul_oracle(**forward, transpose_weight=tw), TOL[BF16])
            grad = {name: inputs[name] for name in ("x", "dy", "group_list")}
            (dw,) = run("native", "GroupedMatmulWeightGrad", grad, {"transpose_weight": tw})
            assert_close(dw, grouped_matmul_weight_grad_oracle(**grad, transpose_weight=tw), TOL[BF16])


def check_flash_attention_family(rng):
    """bfloat16 only, as above."""
    for layout, sizes in [
        ("BNSD", {"s1": 70, "s2": 600, "d": 21, "dv": 13, "sparse_mode": 3}),
        ("BSND", {"s1": 9, "s2": 11, "mask": "bn", "pre_tokens": 4, "next_tokens": 3}),
    ]:
        inputs, attrs = flash_attention_inputs(rng, layout, BF16, **sizes)
        out, row_max, row_sum = run("native", "FlashAttentionScore", inputs, attrs)
        ref_out, ref_max, ref_sum = flash_attention_oracle(**inputs, **attrs)
        assert_close(out, ref_out, TOL[BF16])
        check_stats(row_max, ref_max)
        check_stats(row_sum, ref_sum)


def check_flash_attention_grad_family(rng):
    """bfloat16 only, as above: odd head dims, a mask and several key blocks."""
    for layout, sizes in [
        ("BNSD", {"s1": 70, "s2": 600, "d": 21, "dv": 13, "sparse_mode": 3}),
        ("BSND", {"s1": 9, "s2": 11, "mask": "bn", "pre_tokens": 4, "next_tokens": 3}),
    ]:
        inputs, attrs = flash_attention_inputs(rng, layout, BF16, grad=True, **sizes)
        outputs = run("native", "FlashAttentionScoreGrad", inputs, attrs)
        refs = flash_attention_grad_oracle(**inputs, **attrs)
        for out, ref in zip(outputs, refs, strict=True):
            close(out, ref, TOL[BF16], scale=np.abs(ref) + magnitude(inputs, attrs))


def check_lightning_indexer_family(rng):
    """bfloat16 only, as above."""
    for layout, mode in MODES:
        inputs = forward_inputs(lightning_indexer_grad_inputs(rng, layout, mode, BF16, np.int32))
        check_forward("native", inputs, {"layout": layout, "sparse_mode": mode, "sparse_count": 4}, BF16)


FAMILIES = {
    "rms_norm": check_rms_norm_family,
    "rope": check_rope_family,
    "grouped_matmul": check_grouped_matmul_family,
    "lightning_indexer": check_lightning_indexer_family,
    "flash_attention": check_flash_attention_family,
    "flash_attention_grad": check_flash_attention_grad_family,
}

if __name__ == "__main__":
    for name in sys.argv[1:] or FAMILIES:
        FAMILIES[name](np.random.default_rng(7))
