"""``python -m ort_ascend_ops bench cliffs``: whether a native kernel slows down at a power-of-two
width, where strides alias in the caches (sets, 4K aliasing of loads with stores). Each pair is
one op, dtype and mode at a power-of-two width and at a nearby width, the rest of the shape chosen
for about equal work, timed in alternating turns of the same run (the native kernel alone: no
reference, no peers). The pair's ratio is the power of two's time per element (per FLOP for the
GEMM-shaped indexer ops) over the neighbour's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import BENCHES
from .rotary_position_embedding import MODES
from .runner import TURNS_BUDGET_S, Case, bound_run, op_model, ort_values
from .timing import Timing, measure

RATIO_LIMIT = 1.2

# (power of two, neighbour) widths: the norms' columns, the RoPE and indexer head dims. Both RoPE
# neighbours are multiples of 4, so every mode (2 needs D % 4 == 0) takes them.
NORM_WIDTHS = [(2048, 2112), (4096, 4160), (8192, 8256)]
ROPE_WIDTHS = [(64, 72), (128, 136)]
INDEXER_WIDTHS = [(128, 136)]
QUICK_POWERS = {4096, 128}  # the pairs --quick keeps
# Elements of every norm case and every RoPE case, by quick: the quick bench's 64x4096 and
# 1x128x32x128, the realistic 8192x4096 and 1x4096x32x128; rows or sequence length vary to keep it.
NORM_ELEMENTS = {True: 64 * 4096, False: 8192 * 4096}
ROPE_ELEMENTS = {True: 128 * 32 * 128, False: 4096 * 32 * 128}
ROPE_HEADS = {64: 64, 128: 32}  # by the pair's power of two: a row of N*D = 4096 (Llama-7B's)
# The RoPE benches (every mode of each), the parameters their cases take after the mode, and what
# that adds to the variant's name.
ROPE_BENCHES = [
    ("rotary_position_embedding", (), ""),
    ("rotary_position_embedding_grad", (False,), ""),
    ("rotary_position_embedding_grad", (True,), " +x"),
]
# (S1, S2, N1, K) around the head dim, by quick: the quick bench's, DeepSeek's with 32 query tokens.
INDEXER_GEOMETRY = {True: (16, 512, 8, 128), False: (32, 8192, 64, 2048)}
# FlashAttentionScore/Grad: the head dim is the GEMMs' inner (QK^T) and outer (PV) width; unmasked,
# S1 = S2 = S by quick.
ATTENTION_WIDTHS = [(128, 136)]
ATTENTION_S = {True: 256, False: 1024}
# SwiGlu/Grad: x's width, whose halves lie half of it apart (the gate and up of one row), at the
# norms' element counts.
GLU_WIDTHS = [(4096, 4160), (8192, 8256)]


@dataclass(frozen=True)
class Pair:
    bench: str  # its name in BENCHES, whose ``make`` builds both cases
    variant: str  # the RoPE mode and whether x is given, in words; "" for the other ops
    power: tuple  # the bench's case parameters at the power-of-two width
    neighbour: tuple


def _widths(widths: list[tuple[int, int]], quick: bool) -> list[tuple[int, int]]:
    return [w for w in widths if not quick or w[0] in QUICK_POWERS]


def pairs(quick: bool, dtypes: Sequence[str]) -> list[Pair]:
    """Every op's pairs in each dtype; ``quick``: the 4096- and 128-wide ones at small sizes."""
    plan = [
        Pair(bench, "", *((round(NORM_ELEMENTS[quick] / cols), cols, dtype) for cols in widths))
        for bench in ("rms_norm", "rms_norm_grad")
        for widths in _widths(NORM_WIDTHS, quick)
        for dtype in dtypes
    ]
    for bench, extra, suffix in ROPE_BENCHES:
        for widths in _widths(ROPE_WIDTHS, quick):
            heads = ROPE_HEADS[widths[0]]
            shapes = [(1, round(ROPE_ELEMENTS[quick] / (heads * d)), heads, d) for d in widths]
            plan += [
                Pair(bench, name + suffix, *((shape, dtype, mode, *extra) for shape in shapes))
                for dtype in dtypes
                for mode, name in MODES.items()
            ]
    s1, s2, n1, k = INDEXER_GEOMETRY[quick]
    plan += [
        Pair(bench, "", *((s1, s2, n1, d, k, dtype) for d in widths))
        for bench in ("lightning_indexer", "lightning_indexer_grad")
        for widths in _widths(INDEXER_WIDTHS, quick)
        for dtype in dtypes
    ]
    plan += [
        Pair(bench, "", *((ATTENTION_S[quick], d, 0, dtype) for d in widths))
        for bench in ("flash_attention_score", "flash_attention_score_grad")
        for widths in _widths(ATTENTION_WIDTHS, quick)
        for dtype in dtypes
    ]
    plan += [
        Pair(bench, "", *((round(NORM_ELEMENTS[quick] / cols), cols // 2, dtype) for cols in widths))
        for bench in ("swi_glu", "swi_glu_grad")
        for widths in _widths(GLU_WIDTHS, quick)
        for dtype in dtypes
    ]
    return plan


def _leading(case: Case) -> np.ndarray:
    """The op's first input (x, dy or query), whose last axis is the pair's width."""
    return next(iter(case.inputs.values()))


def work(case: Case) -> float:
    """What the time is divided by: the FLOPs of the GEMM-shaped ops, else the leading operand's
    elements."""
    return case.flops if case.flops is not None else _leading(case).size


def shape(case: Case) -> str:
    return "x".join(map(str, _leading(case).shape))


@dataclass
class Result:
    op: str
    dtype: str
    variant: str
    threads: int
    shapes: tuple[str, str]  # the leading operand's, at the power of two and at the neighbour
    work: tuple[float, float]  # elements or FLOPs per run, the same way
    timings: tuple[Timing, Timing]

    @property
    def ratio(self) -> float:
        (power, neighbour), (w_power, w_neighbour) = self.timings, self.work
        return (power.median / w_power) / (neighbour.median / w_neighbour)

    @property
    def passed(self) -> bool:
        return self.ratio <= RATIO_LIMIT

    def cells(self) -> list[str]:
        (power, neighbour) = self.timings
        return [
            self.op,
            self.dtype,
            self.variant or "-",
            str(self.threads),
            self.shapes[0],
            f"{power.median * 1e3:.2f} ms",
            self.shapes[1],
            f"{neighbour.median * 1e3:.2f} ms",
            f"{self.ratio:.3f}",
            "PASS" if self.passed else "FAIL",
        ]

    def as_dict(self) -> dict:
        row = {"op": self.op, "dtype": self.dtype, "variant": self.variant, "threads": self.threads}
        for side, shape_, work_, timing in zip(
            ("power", "neighbour"), self.shapes, self.work, self.timings, strict=True
        ):
            row |= {
                f"{side}_shape": shape_,
                f"{side}_work": work_,
                f"{side}_s": timing.median,
                f"{side}_spread": timing.spread,
                f"{side}_repeats": timing.repeats,
            }
        return row | {"ratio": self.ratio, "limit": RATIO_LIMIT, "passed": self.passed}


COLUMNS = ["op", "dtype", "mode", "th", "power of two", "time", "neighbour", "time", "ratio", ""]
WIDTHS = [27, 8, 18, 2, 15, 11, 15, 11, 6, 4]


def header() -> str:
    return _line(COLUMNS)


def row(result: Result) -> str:
    return _line(result.cells())


def _line(cells: Sequence[str]) -> str:
    return "  ".join(
        f"{c:<{w}}" if i < 3 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, WIDTHS, strict=True))
    )


def verdict(results: Sequence[Result]) -> str:
    return f"cliffs: {sum(r.passed for r in results)} of {len(results)} pairs within {RATIO_LIMIT}x"


def run_pair(pair: Pair, threads: Sequence[int], max_repeats: int) -> list[Result]:
    """The pair's result on each thread count."""
    cases = [BENCHES[pair.bench].make(params) for params in (pair.power, pair.neighbour)]
    graphs = [(op_model(case), ort_values(case.inputs)) for case in cases]
    power, neighbour = cases
    shapes, works = (shape(power), shape(neighbour)), (work(power), work(neighbour))
    results = []
    for n in threads:
        runs = [bound_run(model, values, n, native=True) for model, values in graphs]
        at_power, at_neighbour = measure(*runs, repeats=max_repeats, budget_s=TURNS_BUDGET_S)
        results.append(
            Result(power.op, power.dtype, pair.variant, n, shapes, works, (at_power, at_neighbour))
        )
    return results


def markdown(results: Sequence[Result]) -> list[str]:
    return [
        "### Cliffs",
        "",
        "Each pair: the native kernel at a power-of-two width and at a nearby width (the leading "
        "operand's shape; the rest chosen for about equal work), timed in alternating turns of the "
        "same run. Ratio: the power of two's time per element (per FLOP for the indexer ops) over "
        f"the neighbour's; PASS within {RATIO_LIMIT}x. `th`: threads.",
        "",
        "| " + " | ".join(COLUMNS[:-1]) + " | |",
        "|" + "---|" * len(COLUMNS),
        *("| " + " | ".join(r.cells()) + " |" for r in results),
        "",
        verdict(results),
    ]
