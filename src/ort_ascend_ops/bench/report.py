"""The suite's outputs: the terminal table, JSON, a Markdown page for docs, a PNG chart."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from . import cliffs, cpu
from .runner import BASELINES, Result

COLUMNS = ["case", "th", "native (median ±spread)", "achieved", "of roof"] + [
    f"vs {t}" for t in BASELINES.values()
]
WIDTHS = [51, 2, 18, 15, 10, 9, 9, 10]


def _cells(result: Result) -> list[str]:
    speedups = [result.speedup(name) for name in BASELINES]
    return [
        result.label,
        str(result.threads),
        f"{result.native.median * 1e3:.2f} ms ±{result.native.spread * 100:.0f}%",
        f"{result.achieved:.1f} {result.unit}",
        f"{result.roof_fraction * 100:.0f}% {result.roof_name}",
        *("-" if s is None else f"{s:.1f}x" for s in speedups),
    ]


def _line(cells: Sequence[str]) -> str:
    return "  ".join(
        f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(cells, WIDTHS, strict=True))
    )


def header() -> str:
    return _line(COLUMNS)


def row(result: Result) -> str:
    return _line(_cells(result))


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict:
    """The machine and software the numbers belong to."""
    packages = ["ort_ascend_ops", "onnxruntime", "onnx", "numpy", "torch", "matplotlib"]
    return {
        "cpu": cpu.describe(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {name: _version(name) for name in packages},
    }


def run_heading(command: str) -> tuple[str, str, int]:
    """A whole-run bench's first line (its command, date and machine), the date, and the threads
    it runs at (every core)."""
    found = machine()
    threads = found["cores"]
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return (
        f"`{command}` ({date}; {cpu.summary(found['cpu'])}; {threads} cores, {threads} threads)",
        date,
        threads,
    )


def write_run(
    command: str, date: str, results, lines: Sequence[str], json_path: str | None, markdown_path: str | None
) -> None:
    """A whole-run bench's outputs (training steps, long sequences, fine-tuning, the NPU's): its
    results with the command and date as JSON, its lines as Markdown."""
    if json_path:
        Path(json_path).write_text(
            json.dumps({"command": command, "date": date, "results": results}, indent=2)
        )
    if markdown_path:
        Path(markdown_path).write_text("\n".join(lines) + "\n")


def write_json(
    path: str, meta: dict, results: Sequence[Result], cliff_results: Sequence[cliffs.Result]
) -> None:
    rows = {"results": [r.as_dict() for r in results], "cliffs": [r.as_dict() for r in cliff_results]}
    with open(path, "w") as f:
        json.dump({**meta, **rows}, f, indent=2)


def _absent_notes(results: Sequence[Result]) -> list[str]:
    """One line per baseline and reason it did not run, with the count of rows it concerns."""
    rows: dict[tuple[str, str], int] = {}
    for r in results:
        for name, why in r.absent.items():
            if why != "no standard op":  # the table's "-" says that already
                rows[BASELINES[name], why] = rows.get((BASELINES[name], why), 0) + 1
    return [f"- {name} did not run on {n} of {len(results)} rows: {why}" for (name, why), n in rows.items()]


def summary(results: Sequence[Result]) -> list[str]:
    """Markdown table rows: for each op and dtype, the case with the most work (its first, where
    modes tie), on each thread count: fraction of the roof and speedups, "1 thread / N threads"."""
    lines = [
        "| op | largest case | of roof | " + " | ".join(f"vs {t}" for t in BASELINES.values()) + " |",
        "|" + "---|" * (3 + len(BASELINES)),
    ]
    for op, dtype in dict.fromkeys((r.op, r.dtype) for r in results):
        rows = [r for r in results if r.op == op and r.dtype == dtype]
        label = max(rows, key=lambda r: r.work).label
        rows = [r for r in rows if r.label == label]

        def joined(values: list[float | None], fmt: str) -> str:
            return (
                "-"
                if set(values) == {None}
                else " / ".join("-" if v is None else fmt.format(v) for v in values)
            )

        cells = [
            op,
            label,
            joined([r.roof_fraction * 100 for r in rows], "{:.0f}%") + f" {rows[0].roof_name}",
        ]
        cells += [joined([r.speedup(name) for r in rows], "{:.1f}x") for name in BASELINES]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_markdown(
    path: str,
    meta: dict,
    results: Sequence[Result],
    peers_by_op: dict[str, str],
    cliff_results: Sequence[cliffs.Result],
) -> None:
    m = meta["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    lines = [
        "## Benchmark results",
        "",
        f"Command: `{meta['command']}`  ",
        f"Date: {meta['date']}; wall time {meta['wall_s']:.0f} s  ",
        f"Machine: {cpu.summary(m['cpu'])}; {m['cores']} cores, {m['platform']}; Python {m['python']}, {versions}",
    ]
    if results:
        lines += _op_sections(meta, results, peers_by_op)
    if cliff_results:
        lines += ["", *cliffs.markdown(cliff_results)]
    Path(path).write_text("\n".join(lines).rstrip() + "\n")


def _op_sections(meta: dict, results: Sequence[Result], peers_by_op: dict[str, str]) -> list[str]:
    lines = [
        "",
        "Each row: the native kernel's time (median of the repeats, ±(max-min)/median), what it "
        "achieves (bytes every input and output must move once, or the GEMM FLOPs), that as a "
        "fraction of the roof measured in the same run on the same threads (copy: a memory copy of "
        "the same bytes; sgemm: NumPy's float32 matrix product; bf16 gemm, for bfloat16 rows: the "
        "faster of that and PyTorch's bfloat16 matrix product), and the speedup over each baseline "
        "(its time / the native time; `-`: it did not run, see the notes). Reference: the op's "
        "inlined ONNX reference function in ONNX Runtime. `th`: threads. The copy roof is the "
        "fastest per byte of plain copies timed in the same turns (NumPy's and libc's memmove, on "
        "one thread or in pieces over the threads, and a memmove large enough to stream its "
        "stores), not a hardware limit: a kernel can beat it by a little, and on a shared machine "
        "noise moves both; the spread shows how much.",
        "",
        f"Summary (threads {' / '.join(map(str, meta['threads']))}):",
        "",
        *summary(results),
    ]
    if meta["absent_peers"]:
        lines += ["", *(f"- {line}" for line in meta["absent_peers"].values())]
    for op in dict.fromkeys(r.op for r in results):
        rows = [r for r in results if r.op == op]
        lines += ["", f"### {op}", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
        notes = _absent_notes(rows)
        lines += ["", peers_by_op.get(op, ""), *([""] + notes if notes else [])]
    return lines


def write_png(path: str, meta: dict, results: Sequence[Result]) -> None:
    """Fraction of the roofline per op and case, one bar per thread count (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = list(dict.fromkeys(r.op for r in results))
    threads = sorted({r.threads for r in results})
    labels = {op: list(dict.fromkeys(r.label for r in results if r.op == op)) for op in ops}
    heights = [len(labels[op]) + 1.5 for op in ops]
    fig, axes = plt.subplots(
        len(ops),
        1,
        figsize=(10, 0.28 * sum(heights) + 1.5),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
        layout="constrained",
    )
    bar = 0.8 / len(threads)
    right = max(110, max(r.roof_fraction * 100 for r in results) + 5)  # one scale for every op
    for ax, op in zip(axes[:, 0], ops, strict=True):
        for j, n in enumerate(threads):
            rows = {r.label: r for r in results if r.op == op and r.threads == n}
            ys = [i + j * bar for i, label in enumerate(labels[op]) if label in rows]
            xs = [rows[label].roof_fraction * 100 for label in labels[op] if label in rows]
            ax.barh(ys, xs, height=bar, label=f"{n} thread{'s' if n > 1 else ''}")
        ax.set_yticks([i + bar * (len(threads) - 1) / 2 for i in range(len(labels[op]))])
        ax.set_yticklabels([label.split(" ", 1)[1] for label in labels[op]], fontsize=7)
        ax.set_ylim(len(labels[op]) - 1 + bar * (len(threads) - 0.5) + 0.2, -bar / 2 - 0.2)  # top down
        ax.axvline(100, color="black", linewidth=0.8)
        ax.set_xlim(0, right)
        roof = next(r.roof_name for r in results if r.op == op)
        ax.set_title(f"{op}: % of the {roof} roofline", fontsize=9, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"ort_ascend_ops bench, {meta['machine']['cpu']['label']}, {meta['date']}", fontsize=10)
    fig.legend(
        *axes[0, 0].get_legend_handles_labels(), loc="outside upper right", fontsize=8, ncols=len(threads)
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
