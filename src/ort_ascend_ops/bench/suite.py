"""The suite: every chosen op's cases on every thread count, a table row as each one ends (and
which case is running, on stderr), then the JSON, Markdown and PNG outputs."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Sequence

from . import BENCHES, cpu, peers, report
from .runner import CaseRunner, Result


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


def _absent_peers() -> dict[str, str]:
    torch = peers.torch_module()
    return {} if torch is not None else {"PyTorch": f"not installed; {peers.TORCH_INSTALL}"}


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
    absent = _absent_peers()
    print(f"{cpu.summary(machine['cpu'])}; {machine['cores']} cores; threads {list(threads)}; {date}")
    torch = "PyTorch " + (f"absent ({absent['PyTorch']})" if absent else machine["versions"]["torch"])
    ort_ops = f"ONNX Runtime {machine['versions']['onnxruntime']} (RMSNormalization, RotaryEmbedding)"
    print(f"peers: {torch}; {ort_ops}", flush=True)
    plan = [(name, params) for name in names for params in BENCHES[name].cases(quick, tuple(dtypes))]
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
    print(f"\nthe largest case of each op and dtype, on {' / '.join(map(str, threads))} threads:")
    print("\n".join(report.summary(results)))
    print(f"{len(results)} rows in {wall:.0f} s" + "".join(f"; {k} absent: {v}" for k, v in absent.items()))
    if json_path:
        report.write_json(json_path, meta, results)
        print(f"wrote {json_path}")
    if markdown_path:
        report.write_markdown(markdown_path, meta, results, peers_by_op)
        print(f"wrote {markdown_path}")
    if png_path:
        problem = report.write_png(png_path, meta, results)
        print(problem or f"wrote {png_path}")
    return results
