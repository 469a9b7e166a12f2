"""``python -m ort_ascend_ops demo``: the main job. Builds the training graphs of the two example
models (``ort_ascend_ops.examples``: a Llama-style decoder block and the DeepSeek indexer loss),
trains each for a few steps of plain SGD on one fixed batch through ONNX Runtime with the native
library (weights fed in, gradients read back, the update done in NumPy), prints the loss as it
falls and a per-op time table from ONNX Runtime's profiler, then checks the gradients against the
portable path (stock ONNX Runtime inlining the reference functions, no library) and against
central finite differences of the forward loss. Ends with a one-line verdict."""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np
import onnxruntime as ort

from .examples import indexer_loss, llama_block
from .reference import FUNCTIONS
from .reference._opset import DOMAIN
from .runtime import get_library_path, make_session, session_options

# Relative error ||native - portable|| / ||portable|| allowed per gradient (float32 throughout).
PORTABLE_TOL = 1e-5
# Central differences in float32: |fd - g| <= FD_RTOL |g| + FD_ATOL on the largest-gradient
# coordinates; each example's step keeps both truncation (~h^2) and rounding (~eps |loss| / h)
# below that.
FD_RTOL, FD_ATOL = 1e-2, 2e-4


@dataclass
class Example:
    key: str
    title: str
    module: ModuleType  # an ort_ascend_ops.examples module
    learning_rate: float
    fd_step: float  # central-difference step
    fd_per_value: int  # finite-difference coordinates per differentiated value
    inputs_kwargs: dict = field(default_factory=dict)


EXAMPLES = [
    Example(
        "llama_block",
        "Llama-style decoder block, MSE loss",
        llama_block,
        learning_rate=0.3,
        fd_step=1e-2,
        fd_per_value=1,
    ),
    Example(
        "indexer_loss",
        "DeepSeek indexer loss KL(p || softmax(selected scores))",
        indexer_loss,
        learning_rate=0.05,
        fd_step=2e-3,  # near-ties in the selection and ReLU kinks lie closer
        fd_per_value=2,
        inputs_kwargs={"ranked": True},  # p ordered like the selected scores: the loss can approach 0
    ),
]
# This package's ops, marked in the time table.
_OUR_OPS = set(FUNCTIONS)


def _say(text: str = "") -> None:
    print(text, flush=True)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def _run(session, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    outputs = session.run({name: inputs[name] for name in session.input_names})
    return dict(zip(session.output_names, outputs, strict=True))


def _op_counts(model) -> str:
    counts: dict[str, int] = defaultdict(int)
    for node in model.graph.node:
        if node.domain == DOMAIN:
            counts[node.op_type] += 1
    return ", ".join(f"{op} x{n}" for op, n in counts.items())


def _profile_table(path: str) -> list[str]:
    """Per op type, over every run but the first (warm-up): kernels, calls, total, mean and median
    kernel time, share of the total; this package's ops marked with *."""
    events = json.loads(Path(path).read_text())
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")
    warm_up = runs[0] if runs else (0, -1)
    times: dict[str, list[float]] = defaultdict(list)
    kernels: dict[str, set] = defaultdict(set)
    for event in events:
        if event.get("cat") != "Node" or not event.get("name", "").endswith("_kernel_time"):
            continue
        if warm_up[0] <= event["ts"] <= warm_up[1]:
            continue
        op_type = event.get("args", {}).get("op_name", "?")
        times[op_type].append(float(event.get("dur", 0)))
        kernels[op_type].add(event["name"])
    total = {op: sum(t) for op, t in times.items()}
    grand = sum(total.values()) or 1.0
    header = f"{'op type':<30} {'kernels':>7} {'calls':>6} {'total ms':>9} {'mean us':>8} {'median us':>9} {'share':>6}"
    rows = [f"    {'':1} {header}"]

    def row(mark, label, n_kernels, samples):
        t = sum(samples)
        return (
            f"    {mark} {label:<30} {n_kernels:>7} {len(samples):>6} {t / 1e3:>9.3f} {t / len(samples):>8.1f} "
            f"{float(np.median(samples)):>9.1f} {100 * t / grand:>5.1f}%"
        )

    ranked = sorted(total, key=lambda op: -total[op])
    shown = [op for i, op in enumerate(ranked) if i < 10 or op in _OUR_OPS]
    rows += [row("*" if op in _OUR_OPS else " ", op, len(kernels[op]), times[op]) for op in shown]
    rest = [op for op in ranked if op not in shown]
    if rest:
        samples = [t for op in rest for t in times[op]]
        rows.append(row(" ", f"({len(rest)} other op types)", sum(len(kernels[op]) for op in rest), samples))
    steps = max(len(runs) - 1, 1)
    rows.append(
        f"      {'all kernels, per run':<30} {sum(len(k) for k in kernels.values()):>7} {'':>6} {grand / 1e3 / steps:>9.3f}"
    )
    return rows


def _finite_differences(example: Example, forward, inputs, grads) -> tuple[float, int, list[str]]:
    """Central differences of the native forward loss on the largest-gradient coordinates of each
    differentiated value: the worst |fd - g| / |g|, the coordinates passed over and any failures.
    The indexer's selection is not differentiable: a coordinate whose steps change it is passed
    over for the next one."""
    worst, skipped, failures = 0.0, 0, []
    selection = _run(forward, inputs).get("sparse_indices")
    h = example.fd_step
    for name in example.module.WRT:
        g = grads[f"{name}_grad"].ravel()
        checked = 0
        for i in np.argsort(-np.abs(g), kind="stable"):
            sides = []
            for sign in (1, -1):
                value = inputs[name].copy()
                value.flat[i] += sign * h
                out = _run(forward, {**inputs, name: value})
                if selection is not None and not np.array_equal(out["sparse_indices"], selection):
                    break
                sides.append(float(out[example.module.LOSS]))
            if len(sides) < 2:
                skipped += 1
                continue
            fd, exact = (sides[0] - sides[1]) / (2 * h), float(g[i])
            worst = max(worst, abs(fd - exact) / max(abs(exact), 1e-30))
            if abs(fd - exact) > FD_RTOL * abs(exact) + FD_ATOL:
                failures.append(
                    f"{example.key}: d loss / d {name}[{i}] is {exact:.6g}, finite differences {fd:.6g}"
                )
            checked += 1
            if checked == example.fd_per_value:
                break
        if checked < example.fd_per_value:
            failures.append(f"{example.key}: no step on {name} keeps the selection")
    return worst, skipped, failures


def _demo_one(example: Example, index: int, steps: int, seed: int, threads: int | None, profile_dir: str):
    """Builds, trains and checks one example; returns a summary dict and the failure reasons."""
    module = example.module
    config = module.Config()
    _say(f"[{index}/{len(EXAMPLES)}] {example.title}: {config.describe()}")
    start = time.perf_counter()
    forward_model, training_model = module.build(config)
    _say(
        f"  built the training graph in {time.perf_counter() - start:.2f} s: {len(forward_model.graph.node)} "
        f"forward nodes -> {len(training_model.graph.node)} training nodes; "
        f"ours: {_op_counts(training_model)}"
    )
    inputs = module.example_inputs(np.random.default_rng(seed), config, **example.inputs_kwargs)
    initial = {name: a.copy() for name, a in inputs.items()}

    options = session_options(threads=threads)
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(profile_dir) / example.key)
    training = make_session(training_model, options=options)
    _say(
        f"  SGD, lr {example.learning_rate:g}, {steps} steps, native library (weights fed, gradients read back)"
    )
    losses = []
    start = time.perf_counter()
    for step in range(steps):
        out = _run(training, inputs)
        losses.append(float(out[module.LOSS]))
        for name in module.WRT:
            inputs[name] = inputs[name] - np.float32(example.learning_rate) * out[f"{name}_grad"]
        if step % 5 == 0 or step == steps - 1:
            _say(f"    step {step:>3}  loss {losses[-1]:.5f}")
    elapsed = time.perf_counter() - start
    final = float(_run(training, inputs)[module.LOSS])
    _say(f"    after {steps} steps loss {final:.5f} ({elapsed * 1e3 / max(steps, 1):.2f} ms per step)")
    profile = training.ort.end_profiling()
    _say(
        "  per-op kernel time, runs after the first (ONNX Runtime profiler; * = this package's ops, "
        "native kernels)"
    )
    for row in _profile_table(profile):
        _say(row)

    failures = []
    first = losses[0] if losses else final
    if not (np.isfinite(losses).all() and np.isfinite(final) and final < first):
        failures.append(f"{example.key}: the loss did not fall ({first:.5g} -> {final:.5g})")

    # Checks at the initial point: native vs portable, and finite differences.
    native = _run(make_session(training_model, threads=threads), initial)
    portable = _run(make_session(training_model, threads=threads, native=False), initial)
    differences = {name: _relative(native[name], portable[name]) for name in native}
    worst_grad = max((name for name in differences if name != module.LOSS), key=differences.get)
    _say(
        f"  native vs portable path (no library), relative difference: loss {differences[module.LOSS]:.1e}, "
        f"worst gradient {worst_grad} {differences[worst_grad]:.1e} (tolerance {PORTABLE_TOL:g})"
    )
    failures += [
        f"{example.key}: {name} differs from the portable path by {d:.2g} (> {PORTABLE_TOL:g})"
        for name, d in differences.items()
        if not d <= PORTABLE_TOL
    ]
    forward = make_session(forward_model, threads=threads)
    fd_worst, skipped, fd_failures = _finite_differences(example, forward, initial, native)
    count = example.fd_per_value * len(module.WRT)
    passed_over = f"; {skipped} passed over: the step changed the selection" if skipped else ""
    _say(
        f"  finite differences (central, step {example.fd_step:g}, float32) on {count} coordinates: worst "
        f"relative error {fd_worst:.1e} (tolerance {FD_RTOL:g} + {FD_ATOL:g} absolute){passed_over}"
    )
    failures += fd_failures
    summary = {
        "loss": (first, final),
        "portable": max(differences.values()),
        "fd": fd_worst,
    }
    return summary, failures


def main(steps: int = 20, seed: int = 0, threads: int | None = 1) -> int:
    """Runs the demo; ``threads`` is ONNX Runtime's intra-op thread count (None: its default). The
    models are tiny, so one thread is the fastest and the steadiest to time."""
    start = time.perf_counter()
    _say(
        f"ort_ascend_ops demo: training graphs through ONNX Runtime {ort.__version__} with the native "
        f"library {Path(get_library_path()).name}, {threads or 'default'} intra-op thread(s)"
    )
    summaries, failures = {}, []
    with tempfile.TemporaryDirectory(prefix="ort_ascend_ops_demo_") as profile_dir:
        for index, example in enumerate(EXAMPLES, 1):
            try:
                summaries[example.key], failed = _demo_one(example, index, steps, seed, threads, profile_dir)
            except Exception as error:  # report, and go on with the other example
                _say(f"  ERROR: {type(error).__name__}: {error}")
                failed = [f"{example.key}: {type(error).__name__}: {error}"]
            failures += failed
            _say()
    _say(f"done in {time.perf_counter() - start:.1f} s")
    if failures:
        _say("verdict: FAIL: " + "; ".join(failures))
        return 1
    losses = ", ".join(f"{key} {s['loss'][0]:.3f} -> {s['loss'][1]:.3f}" for key, s in summaries.items())
    portable = max(s["portable"] for s in summaries.values())
    fd = max(s["fd"] for s in summaries.values())
    _say(
        f"verdict: PASS: losses fell ({losses}); gradients agree with the portable path (worst "
        f"{portable:.1e}) and with finite differences (worst {fd:.1e})"
    )
    return 0
