"""The suite: every chosen op's cases on every thread count, a table row as each one ends (and
which case is running, on stderr), the power-of-two pairs (cliffs) likewise, then the JSON,
Markdown and PNG outputs."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Sequence

from . import BENCHES, CLIFFS, cliffs, cpu, peers, report
from .runner import BASELINES, CaseRunner, Result


def _progress(text: str) -> None:
    if sys.stderr.isatty():  # one line, overwritten by the next progress or row
        sys.stderr.write(f"\r\033[K{text}")
        sys.stderr.flush()
    else:
        print(text, file=sys.stderr, flush=True)


def _print_row(text: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
    print(text, flush=True)


def _absent(cases: bool, png_path: str | None) -> dict[str, str]:
    """The line saying so, by name, for each peer or package the run goes without (``cases``: the
    run has op cases; the pairs of cliffs run no peers and no roof)."""
    lines = {}
    if cases and peers.torch_module() is None:
        column = f"vs {BASELINES['torch']}"
        lines["PyTorch"] = peers.absent("PyTorch", peers.TORCH_INSTALL, f"its column ({column}) stays empty")
    if cases and not peers.importable("threadpoolctl"):
        lines["threadpoolctl"] = peers.absent(
            "threadpoolctl", peers.BENCH_INSTALL, "the sgemm roof runs on NumPy's default BLAS threads"
        )
    if png_path and not peers.importable("matplotlib"):
        lines["matplotlib"] = peers.absent(
            "matplotlib", peers.BENCH_INSTALL, f"no chart written to {png_path}"
        )
    return lines


def _cliffs(
    threads: Sequence[int], dtypes: Sequence[str], quick: bool, max_repeats: int
) -> list[cliffs.Result]:
    """Every power-of-two pair on every thread count, a row as each one ends."""
    plan = cliffs.pairs(quick, dtypes)
    print(f"\npower-of-two widths against nearby ones (pass: ratio <= {cliffs.RATIO_LIMIT}):")
    print(cliffs.header(), flush=True)
    results: list[cliffs.Result] = []
    for i, pair in enumerate(plan, 1):
        _progress(f"[{i}/{len(plan)}] cliffs: {pair.bench} {pair.variant} {pair.power} vs {pair.neighbour}")
        for result in cliffs.run_pair(pair, threads, max_repeats):
            _print_row(cliffs.row(result))
            results.append(result)
        gc.collect()
    return results


def run(
    names: Sequence[str],
    threads: Sequence[int],
    dtypes: Sequence[str],
    quick: bool,
    max_repeats: int,
    command: str,
    json_path: str | None = None,
    markdown_path: str | None = None,
    png_path: str | None = None,
) -> list[Result]:
    start = time.perf_counter()
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    machine = report.machine()
    print(f"{cpu.summary(machine['cpu'])}; {machine['cores']} cores; threads {list(threads)}; {date}")
    plan = [
        (name, params)
        for name in names
        if name in BENCHES
        for params in BENCHES[name].cases(quick, tuple(dtypes))
    ]
    absent = _absent(bool(plan), png_path)
    if plan:
        torch = [] if "PyTorch" in absent else [f"PyTorch {machine['versions']['torch']}"]
        ort_ops = f"ONNX Runtime {machine['versions']['onnxruntime']} (RMSNormalization, RotaryEmbedding)"
        print(f"peers: {'; '.join([*torch, ort_ops])}")
    for line in absent.values():
        print(line)
    if plan:
        print(report.header(), flush=True)
    results: list[Result] = []
    peers_by_op: dict[str, str] = {}  # op -> what its peers run, in words
    for i, (name, params) in enumerate(plan, 1):
        _progress(f"[{i}/{len(plan)}] {name}: preparing inputs")
        row_start = time.perf_counter()
        runner = CaseRunner(BENCHES[name].make(params))
        peers_by_op[runner.case.op] = BENCHES[name].PEERS
        for n in threads:
            _progress(f"[{i}/{len(plan)}] running {runner.case.label} on {n} thread{'s' if n > 1 else ''}")
            results.append(runner.run(n, max_repeats))
            results[-1].wall_s, row_start = time.perf_counter() - row_start, time.perf_counter()
            _print_row(report.row(results[-1]))
        del runner
        gc.collect()  # the large cases' inputs, sessions and PyTorch graphs
    cliff_results = _cliffs(threads, dtypes, quick, max_repeats) if CLIFFS in names else []
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    wall = time.perf_counter() - start
    meta = {
        "command": command,
        "date": date,
        "wall_s": wall,
        "quick": quick,
        "threads": list(threads),
        "dtypes": list(dtypes),
        "machine": machine,
        "absent_peers": absent,
    }
    if results:
        print(f"\nthe largest case of each op and dtype, on {' / '.join(map(str, threads))} threads:")
        print("\n".join(report.summary(results)))
    if cliff_results:
        print(cliffs.verdict(cliff_results))
    rows = len(results) + len(cliff_results)
    print(f"{rows} rows in {wall:.0f} s")
    if json_path:
        report.write_json(json_path, meta, results, cliff_results)
        print(f"wrote {json_path}")
    if markdown_path:
        report.write_markdown(markdown_path, meta, results, peers_by_op, cliff_results)
        print(f"wrote {markdown_path}")
    if png_path and "matplotlib" not in absent:
        report.write_png(png_path, meta, results)
        print(f"wrote {png_path}")
    return results
