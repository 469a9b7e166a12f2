"""``python -m ort_ascend_ops demo``: the main job.

1. A tiny Hugging Face Llama over bytes (``models/byte_llama.onnx``, exported from transformers by
   ``export_torch``; random init) trained with AdamW and a linear schedule on the bytes of this
   Python's standard library sources, a held-out share of the files measuring generalisation,
   through ``generate_artifacts`` and the training API (``ort_ascend_ops.trainer``): the loss
   falls from ln 256, a loss-curve PNG and CSV are written, a per-op time table comes from ONNX
   Runtime's profiler, and one step's gradients are checked against the portable path.
2. DeepSeek-V3.2's indexer warm-up (DSA): a tiny random transformers ``DeepseekV32ForCausalLM``
   (``models/hf/deepseek_v32_b2.onnx``, exported by ``export_torch``) fused (its indexers become
   LightningIndexer) and made the indexer's training model by ``indexer_warmup``, trained with
   AdamW on windows of the same bytes through LightningIndexerGrad: the KL loss falls, the per-op
   table shows the grad op, one step's gradients are checked against the portable path.
3. The DeepSeek indexer loss (``ort_ascend_ops.examples.indexer_loss``), trained a few steps of
   plain SGD through LightningIndexerGrad, its gradients checked against the portable path and
   central finite differences.
4. A Hugging Face model directory as a user brings one (``train HF_DIR``): a tiny Qwen2 directory
   written here (the Hub is out of reach) with a BPE tokenizer trained on standard-library
   packages, trained on their text through its tokenizer, written back as a directory that
   ``AutoModelForCausalLM.from_pretrained`` reloads and generates from; the reloaded model's
   held-out loss in PyTorch must equal our eval model's. Needs the ``torch`` extra.
5. LoRA fine-tuning of section 4's trained directory as PEFT users do it (``train HF_DIR
   --lora-r 8 --pack``) on chat-format data written here (``messages``; the loss on the
   assistant's tokens), several conversations packed in each window, each attending to itself
   alone: the adapter directory
   ``PeftModel.from_pretrained`` loads, its held-out loss in PyTorch equal to our eval model's,
   and an answer generated from it. Needs the ``torch`` extra (PEFT in it).

Ends with a one-line verdict."""

from __future__ import annotations

import functools
import json
import sysconfig
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import onnxruntime as ort

from .domain import DOMAIN
from .examples import byte_llama, deepseek_v32, indexer_loss
from .reference import FUNCTIONS
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
        "indexer_loss",
        "DeepSeek indexer loss KL(p || softmax(selected scores))",
        indexer_loss,
        learning_rate=0.05,
        fd_step=2e-3,  # near-ties in the selection and ReLU kinks lie closer
        fd_per_value=2,
        inputs_kwargs={"ranked": True},  # p ordered like the selected scores: the loss can approach 0
    ),
]
# The indexer warm-up: AdamW at this learning rate (torch.optim's defaults otherwise).
WARMUP_LR = 1e-2
# The language model must end below this loss (nats per byte; ln 256 = 5.55 is a uniform guess),
# on the training and the held-out bytes.
LM_TARGET_LOSS = 3.0
_SECTIONS = 4 + len(EXAMPLES)
# The Hugging Face directory's text: standard-library packages (their sources, tokenized).
HF_PACKAGES = ("json", "email", "http", "logging", "asyncio", "urllib", "importlib", "xml")
HF_BATCH, HF_SEQ, HF_LR = 8, 64, 3e-3  # its steps: the language model's (--lm-steps)
HF_SIZES = dict(hidden_size=128, intermediate_size=344, head_dim=32, max_position_embeddings=128)
# LoRA on chat data: its steps at most the language model's (--lm-steps).
LORA_EXAMPLES, LORA_STEPS, LORA_SEQ, LORA_LR = 400, 80, 128, 1e-2
# This package's ops, marked in the time table.
_OUR_OPS = set(FUNCTIONS)


def _say(text: str = "") -> None:
    print(text, flush=True)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b)) / max(float(np.linalg.norm(b)), 1e-300)


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
    _say(f"[{index}/{_SECTIONS}] {example.title}: {config.describe()}")
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
    worst_grad = max((name for name in differences if name != module.LOSS), key=differences.__getitem__)
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


def _demo_language_model(settings, threads: int | None, profile_dir: str):
    """Trains the byte-level Llama; returns a summary dict and the failure reasons."""
    from .trainer import RunFolder, train
    from .training.artifacts import artifact_paths

    model = byte_llama.model_path()
    _say(f"[1/{_SECTIONS}] Hugging Face Llama over bytes ({model.name}): {byte_llama.describe()}")
    if settings is None:
        return {}, ["byte_llama: trained no steps"]
    start = time.perf_counter()
    outcome = train(settings, say=lambda text: _say("  " + text))
    elapsed = time.perf_counter() - start
    history, corpus, folder = outcome.history, outcome.corpus, RunFolder(settings.folder)
    losses = history.losses()
    evals = history.evals()
    step_ms = 1e3 * float(np.median([r["seconds"] for r in history.rows]))
    tokens = settings.batch * settings.seq
    _say(
        f"  loss {losses[0]:.3f} -> {losses[-1]:.3f} (ln 256 = {np.log(256):.3f}), held out {evals[0][1]:.3f} "
        f"(step {evals[0][0]}) -> {evals[-1][1]:.3f}; {elapsed:.0f} s, median step {step_ms:.0f} ms "
        f"({tokens / step_ms * 1e3:,.0f} tokens/s)"
    )
    _say(f"  wrote {folder.curve}, {folder.losses} and the checkpoint")

    paths = artifact_paths(folder.artifacts)
    feeds = corpus.rows("train", 0, settings.batch, settings.seq, settings.seed).feeds(
        ["input_ids", "labels"]
    )
    _profile_steps(paths, feeds, threads, profile_dir, "byte_llama")
    differences, failures = _check_portable("byte_llama", paths, feeds, threads)
    if not losses[-1] < LM_TARGET_LOSS:
        failures.append(f"byte_llama: the loss ended at {losses[-1]:.3f}, not below {LM_TARGET_LOSS}")
    if not evals[-1][1] < LM_TARGET_LOSS:
        failures.append(
            f"byte_llama: the held-out loss ended at {evals[-1][1]:.3f}, not below {LM_TARGET_LOSS}"
        )
    summary = {"loss": (losses[0], losses[-1]), "eval": evals[-1][1], "portable": max(differences.values())}
    return summary, failures


def _demo_hf_directory(steps: int, seed: int, threads: int | None, out: Path):
    """Section 4 (see the module's doc); a None summary when the torch extra is missing."""
    try:
        import torch
        import transformers
    except ImportError:
        _say(f"[{_SECTIONS - 1}/{_SECTIONS}] Hugging Face directory: skipped (needs pip install '.[torch]')")
        return None, []
    from .examples.hf_models import write_model_directory
    from .trainer import Settings, train

    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(str(f) for package in HF_PACKAGES for f in (root / package).rglob("*.py"))
    source, trained = out / "hf-model", out / "hf-trained"
    write_model_directory(
        source, [Path(f).read_text(errors="replace") for f in files], vocab_size=1024, sizes=HF_SIZES
    )
    _say(
        f"[{_SECTIONS - 1}/{_SECTIONS}] Hugging Face directory {source} (Qwen2, GQA, tied embeddings, BPE tokenizer)"
    )
    if not steps:
        return {}, ["hf_directory: trained no steps"]
    settings = Settings(
        model=str(source), data=tuple(files), steps=steps, batch=HF_BATCH, seq=HF_SEQ, lr=HF_LR, out=str(trained),
        overwrite=True, save_every=0, seed=seed, threads=threads or 0, lr_scheduler="cosine",
    )  # fmt: skip
    outcome = train(settings, say=lambda text: _say("  " + text))
    history, corpus = outcome.history, outcome.corpus
    losses, failures = history.losses(), []
    reloaded, info = transformers.AutoModelForCausalLM.from_pretrained(trained, output_loading_info=True)
    if any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")):
        failures.append(f"hf_directory: from_pretrained({trained}) reported {info}")
    tokenizer = transformers.AutoTokenizer.from_pretrained(trained)
    prompt = tokenizer("def ", return_tensors="pt").input_ids
    with torch.no_grad():
        generated = reloaded.generate(prompt, max_new_tokens=16, do_sample=False)
        theirs = _torch_held_out_loss(reloaded, corpus, settings, seed, HF_SEQ)
    ours = history.evals()[-1][1]
    _say(f"  loss {losses[0]:.3f} -> {losses[-1]:.3f} (ln 1024 = {np.log(1024):.3f}); held out: ours {ours:.4f}, "
         f"the reloaded model in PyTorch {theirs:.4f}")  # fmt: skip
    _say(f"  generated: {tokenizer.decode(generated[0])!r}")
    failures += _trained_failures("hf_directory", losses, ours, theirs, "the reloaded model's")
    return {"loss": (losses[0], losses[-1])}, failures


def _trained_failures(section: str, losses, ours: float, theirs: float, whose: str) -> list[str]:
    """A Hugging Face section's failures: its loss not down by 1, our held-out loss not ``whose``
    in PyTorch (``theirs``) within 1e-4."""
    failures = []
    if not losses[-1] < losses[0] - 1.0:
        failures.append(f"{section}: the loss went {losses[0]:.3f} -> {losses[-1]:.3f}, not down by 1")
    if not abs(ours - theirs) <= 1e-4 * theirs:
        failures.append(f"{section}: our held-out loss {ours:.5f} is not {whose} {theirs:.5f}")
    return failures


def _torch_held_out_loss(model, corpus, settings, seed: int, seq: int) -> float:
    """``model``'s mean loss in PyTorch over the held-out rows our eval model measured; packed rows
    carry their positions, off whose restarts transformers reads the documents' boundaries, as we do."""
    import torch

    losses = []
    for i in range(settings.eval_batches):
        rows = corpus.rows("held_out", i, HF_BATCH, seq, seed)
        names = ["input_ids", "labels"] + (["position_ids"] if rows.positions is not None else [])
        feeds = dict(zip(names, rows.feeds(names), strict=True))
        losses.append(float(model(**{n: torch.from_numpy(v) for n, v in feeds.items()}).loss))
    return float(np.mean(losses))


def _demo_lora(steps: int, seed: int, threads: int | None, out: Path):
    """Section 5 (see the module's doc), on section 4's directory; a None summary when the torch
    extra is missing."""
    try:
        import peft
        import torch
        import transformers
    except ImportError:
        _say(f"[{_SECTIONS}/{_SECTIONS}] LoRA on chat data: skipped (needs pip install '.[torch]')")
        return None, []
    from .examples.chat import write_chat_examples
    from .trainer import Settings, train

    source, adapter = out / "hf-trained", out / "hf-lora"  # section 4's model
    data = write_chat_examples(out / "chat.jsonl", LORA_EXAMPLES, seed)
    _say(f"[{_SECTIONS}/{_SECTIONS}] LoRA fine-tuning of {source} on {data} (chat messages, packed)")
    if not steps:
        return {}, ["lora: trained no steps"]
    settings = Settings(
        model=str(source), data=(str(data),), steps=min(steps, LORA_STEPS), batch=HF_BATCH, seq=LORA_SEQ, lr=LORA_LR,
        out=str(adapter), overwrite=True, save_every=0, seed=seed, threads=threads or 0, lora_r=8,
        lora_target=("all-linear",), pack=True,
    )  # fmt: skip
    outcome = train(settings, say=lambda text: _say("  " + text))
    losses, failures = outcome.history.losses(), []
    base = transformers.AutoModelForCausalLM.from_pretrained(source)
    reloaded = peft.PeftModel.from_pretrained(base, adapter).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(adapter)
    with torch.no_grad():
        theirs = _torch_held_out_loss(reloaded, outcome.corpus, settings, seed, LORA_SEQ)
        question = [{"role": "user", "content": "What is 21 + 14?"}]
        prompt = tokenizer.apply_chat_template(
            question, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        answer = reloaded.generate(**prompt, max_new_tokens=12, do_sample=False)[
            0, prompt["input_ids"].shape[1] :
        ]
    ours = outcome.history.evals()[-1][1]
    _say(f"  loss {losses[0]:.3f} -> {losses[-1]:.3f}; held out: ours {ours:.4f}, PEFT's reloaded adapter in PyTorch "
         f"{theirs:.4f}")  # fmt: skip
    _say(f"  asked {question[0]['content']!r}, the adapted model answers {tokenizer.decode(answer)!r}")
    failures += _trained_failures("lora", losses, ours, theirs, "PEFT's reloaded adapter's")
    return {"loss": (losses[0], losses[-1])}, failures


def _profile_steps(paths, feeds, threads: int | None, profile_dir: str, key: str, steps: int = 5) -> None:
    """Prints the per-op table of ``steps`` training steps after a warm-up one, from a fresh
    checkpoint (the optimizer's own session is not profiled)."""
    from .training.api import CheckpointState, Module, Optimizer, training_session_options

    options = training_session_options(threads=threads)
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(profile_dir) / key)
    profiled = Module(
        paths["training"], CheckpointState.load_checkpoint(paths["checkpoint"]), session_options=options
    )
    optimizer = Optimizer(
        paths["optimizer"], profiled, session_options=training_session_options(threads=threads)
    )
    for _ in range(steps + 1):
        profiled(*feeds)
        optimizer.step()
        profiled.lazy_reset_grad()
    _say(
        f"  per-op kernel time of the training model, {steps} steps after a warm-up (* = this package's ops)"
    )
    for row in _profile_table(profiled.training_session.end_profiling()):
        _say(row)


def _check_portable(key: str, paths, feeds, threads: int | None) -> tuple[dict[str, float], list[str]]:
    """One step's gradients at the checkpoint's weights, native against portable: the relative
    differences, and a failure for each beyond ``PORTABLE_TOL``."""
    from .training.api import CheckpointState, Module

    grads = {}
    for native in (True, False):
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
        Module(paths["training"], state, threads=threads, native=native)(*feeds)
        grads[native] = {name: p.grad for name, p in state.parameters.items() if p.grad is not None}
    differences = {name: _relative(grads[True][name], grads[False][name]) for name in grads[True]}
    worst = max(differences, key=differences.__getitem__)
    _say(
        f"  native vs portable path, one step's gradients at the initial weights: worst {worst} "
        f"{differences[worst]:.1e} (tolerance {PORTABLE_TOL:g})"
    )
    failures = [
        f"{key}: {name} differs from the portable path by {d:.2g} (> {PORTABLE_TOL:g})"
        for name, d in differences.items()
        if not d <= PORTABLE_TOL
    ]
    return differences, failures


def _demo_indexer_warmup(steps: int, seed: int, threads: int | None, profile_dir: str, corpus):
    """DeepSeek-V3.2's indexer warm-up on the byte corpus; returns a summary dict and the
    failure reasons."""
    from .training import indexer_warmup
    from .training.api import CheckpointState, Module, Optimizer
    from .training.artifacts import generate_artifacts
    from .training.optim import AdamW

    path = deepseek_v32.model_path()
    batch, seq = deepseek_v32.BATCHES[-1], deepseek_v32.SEQUENCE
    _say(f"[2/{_SECTIONS}] DeepSeek-V3.2 indexer warm-up, DSA ({path.name}): {deepseek_v32.describe()}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ort_ascend_ops_warmup_") as folder:
        paths = generate_artifacts(
            indexer_warmup(onnx.load(path)), optimizer=AdamW(lr=WARMUP_LR), artifact_directory=folder
        )
        training_model = onnx.load(paths["training"])
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
        trained = [name for name, p in state.parameters.items() if p.requires_grad]
        _say(
            f"  fused, indexer_warmup and generate_artifacts in {time.perf_counter() - start:.1f} s: "
            f"{len(trained)} indexer parameters trained, the rest frozen; ours: {_op_counts(training_model)}"
        )
        module = Module(paths["training"], state, threads=threads)
        optimizer = Optimizer(paths["optimizer"], module)
        _say(f"  AdamW, lr {WARMUP_LR:g}, {steps} steps, batch {batch} x seq {seq} of the training bytes")
        first = corpus.batch("train", 0, batch, seq, seed)
        losses = []
        start = time.perf_counter()
        for step in range(steps):
            losses.append(float(module(corpus.batch("train", step, batch, seq, seed))))
            optimizer.step()
            module.lazy_reset_grad()
            if step % 10 == 0 or step == steps - 1:
                _say(f"    step {step:>3}  KL loss {losses[-1]:.4f}")
        elapsed = time.perf_counter() - start
        # The first window once more: the loss on it fell, not merely that of other windows.
        final = float(module(first))
        initial = losses[0] if losses else final
        _say(
            f"    first window's KL loss {initial:.4f} -> {final:.4f} "
            f"({elapsed * 1e3 / max(steps, 1):.1f} ms per step)"
        )
        _profile_steps(paths, [first], threads, profile_dir, "deepseek_v32")
        differences, failures = _check_portable("deepseek_v32", paths, [first], threads)
    if not (np.isfinite(losses).all() and np.isfinite(final) and final < initial):
        failures.append(f"deepseek_v32: the KL loss did not fall ({initial:.5g} -> {final:.5g})")
    return {"loss": (initial, final), "portable": max(differences.values())}, failures


def main(*, steps: int, seed: int, threads: int | None, lm_steps: int, out: str, warmup_steps: int) -> int:
    """Runs the demo; ``threads`` is ONNX Runtime's intra-op thread count (None: its default);
    ``lm_steps`` AdamW steps of the language model, ``warmup_steps`` AdamW steps of the DeepSeek
    indexer warm-up, ``steps`` SGD steps of the indexer loss. The defaults are the command line's
    (``python -m ort_ascend_ops demo``)."""
    from .trainer import Corpus, Settings

    start = time.perf_counter()
    _say(
        f"ort_ascend_ops demo: training through ONNX Runtime {ort.__version__} with the native library "
        f"{Path(get_library_path()).name}, {threads or 'default'} intra-op thread(s)"
    )
    # The demo's folder is its own: each run replaces the last one's.
    settings = (
        Settings(
            model=str(byte_llama.model_path()),
            steps=lm_steps,
            batch=byte_llama.BATCH,
            seq=byte_llama.SEQUENCE,
            lr=byte_llama.LEARNING_RATE,
            out=out,
            overwrite=True,
            save_every=0,
            seed=seed,
            threads=threads or 0,
        )
        if lm_steps
        else None
    )
    corpus = Corpus.python_stdlib()
    sections: list[tuple[str, Callable[[str], tuple[dict, list[str]]]]] = [
        ("byte_llama", lambda folder: _demo_language_model(settings, threads, folder)),
        ("deepseek_v32", lambda folder: _demo_indexer_warmup(warmup_steps, seed, threads, folder, corpus)),
    ]
    for index, example in enumerate(EXAMPLES, 3):
        sections.append((example.key, functools.partial(_demo_one, example, index, steps, seed, threads)))
    sections.append(("hf_directory", lambda folder: _demo_hf_directory(lm_steps, seed, threads, Path(out))))
    sections.append(("lora", lambda folder: _demo_lora(lm_steps, seed, threads, Path(out))))
    summaries, failures = {}, []
    with tempfile.TemporaryDirectory(prefix="ort_ascend_ops_demo_") as profile_dir:
        for key, section in sections:
            try:
                summary, failed = section(profile_dir)
                if summary is not None:
                    summaries[key] = summary
            except Exception as error:  # report, and go on with the others
                _say(f"  ERROR: {type(error).__name__}: {error}")
                failed = [f"{key}: {type(error).__name__}: {error}"]
            failures += failed
            _say()
    _say(f"done in {time.perf_counter() - start:.1f} s")
    if failures:
        _say("verdict: FAIL: " + "; ".join(failures))
        return 1
    losses = ", ".join(f"{key} {s['loss'][0]:.3f} -> {s['loss'][1]:.3f}" for key, s in summaries.items())
    portable = max(s["portable"] for s in summaries.values() if "portable" in s)
    fd = summaries[EXAMPLES[0].key]["fd"]
    _say(
        f"verdict: PASS: losses fell ({losses}; held out {summaries['byte_llama']['eval']:.3f}); gradients "
        f"agree with the portable path (worst {portable:.1e}) and with finite differences (worst {fd:.1e}); "
        f"loss curve in {Path(out) / 'loss_curve.png'}"
        + (
            f"; trained Hugging Face model in {Path(out) / 'hf-trained'}"
            if "hf_directory" in summaries
            else ""
        )
        + (f"; LoRA adapter (PEFT) in {Path(out) / 'hf-lora'}" if "lora" in summaries else "")
    )
    return 0
