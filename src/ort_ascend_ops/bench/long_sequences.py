"""``python -m ort_ascend_ops bench training_step --recompute``: what long sequences cost, in peak
RSS and ms/step at batch 1 and sequences of 1024, 4096 and 8192 tokens, for each of ours'
activation recompute modes (and the loss in chunks) against PyTorch eager with and without
Hugging Face's ``gradient_checkpointing_enable()``, on the same transformers model and weights.
Every engine runs its steps in a child process of its own (``training_memory``), which reports
its high-water mark of resident memory and each step's time: the first step is a warm-up, the
median of the others is reported. A second config has a vocabulary of 128k, where the loss's
logits (``[tokens, vocab]`` in float32) outweigh the layers' activations."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from . import report, training_memory
from .training_step import build_model

LOSS_CHUNK = 1024  # tokens per chunk of the loss (MindSpeed's default chunk is 1024 too)
# (engine, recompute, loss chunk) of ours; PyTorch's engines with checkpointing or without.
OURS = [
    ("ours native", "none", None),
    ("ours native recompute=selective", "selective", None),
    ("ours native recompute=full", "full", None),
    (f"ours native recompute=full loss_chunk_size={LOSS_CHUNK}", "full", LOSS_CHUNK),
]
TORCH = [("PyTorch eager", False), ("PyTorch eager gradient_checkpointing", True)]
STEPS = 3  # one warm-up


def _llama(
    vocab: int, layers: int, seqs: list[int], quick_seqs: list[int], hidden: int = 256, heads: int = 4
) -> dict:
    intermediate = 688 * hidden // 256
    return {
        "title": f"HF Llama, hidden {hidden}, intermediate {intermediate}, {layers} layers, {heads} heads / 2 kv "
        f"heads, vocab {vocab}",
        "config": dict(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=2,
            max_position_embeddings=max(seqs),
            tie_word_embeddings=False,
            use_cache=False,
        ),
        "seqs": seqs,
        "quick_seqs": quick_seqs,
    }


CONFIGS = {
    "long": _llama(32000, 4, [1024, 4096, 8192], [128, 256]),
    # Issue 51's row: hidden 384, where the attention's share of the step grows with the sequence.
    "long384": _llama(32000, 4, [1024, 4096], [128], hidden=384, heads=6),
    "vocab128k": _llama(131072, 2, [8192], [256]),
}


def _say(text: str) -> None:
    print(text, flush=True)


def _artifacts(model, seq: int, folder: Path) -> dict[str, dict]:
    """Ours' artifacts at batch 1 x ``seq``, one set per entry of OURS."""
    import torch

    from ..training import export_torch
    from ..training.artifacts import generate_artifacts
    from ..training.optim import AdamW

    ids = torch.zeros((1, seq), dtype=torch.int64)
    exported = export_torch(model.eval(), {"input_ids": ids, "labels": ids.clone()})
    paths = {}
    for engine, recompute, chunk in OURS:
        start = time.perf_counter()
        paths[engine] = generate_artifacts(
            exported,
            loss=None,
            optimizer=AdamW(),
            artifact_directory=folder / f"{recompute}-{chunk}",
            recompute=recompute,
            loss_chunk_size=chunk,
        )
        _say(f"  {engine}: artifacts in {time.perf_counter() - start:.1f} s")
    return {e: {k: str(v) for k, v in p.items()} for e, p in paths.items()}


def run_config(name: str, spec: dict, seqs: list[int], threads: int, folder: Path) -> dict:
    import torch

    _say(f"\n## {name}: {spec['title']}; batch 1")
    model = build_model({"config": spec["config"]})
    weights = folder / "weights.pt"
    torch.save(model.state_dict(), weights)
    out: dict[int, dict[str, dict]] = {}
    for seq in seqs:
        batch = folder / f"batch_{seq}.npy"
        ids = np.random.default_rng(seq).integers(0, spec["config"]["vocab_size"], (1, seq), dtype=np.int64)
        np.save(batch, ids)
        job = {"seq": seq, "threads": threads, "steps": STEPS, "batch": str(batch)}
        job |= {"weights": str(weights), "architecture": "LlamaConfig", "config": spec["config"]}
        paths = _artifacts(model, seq, folder / f"seq{seq}")
        out[seq] = {}
        for engine, _, _ in OURS:
            out[seq][engine] = training_memory.measure(
                job | {"engine": engine, "paths": paths[engine]}, folder
            )
            _say(f"  seq {seq}: {engine}: {_cell(out[seq][engine])}")
        for engine, checkpointing in TORCH:
            out[seq][engine] = training_memory.measure(
                job | {"engine": engine, "checkpointing": checkpointing}, folder
            )
            _say(f"  seq {seq}: {engine}: {_cell(out[seq][engine])}")
    return {"name": name, "title": spec["title"], "vocab": spec["config"]["vocab_size"], "memory": out}


def _step_ms(result: dict) -> float | None:
    seconds = result.get("seconds", [])[1:]
    return statistics.median(seconds) * 1e3 if seconds else None


def _cell(result: dict) -> str:
    if "error" in result:
        return f"failed: {result['error']}"
    return f"{result['peak_rss'] / 2**20:,.0f} MB, {_step_ms(result):,.0f} ms/step, loss {result['losses'][0]:.4f}"


def table(result: dict) -> list[str]:
    """Peak RSS and ms/step per engine and sequence; each of ours' modes against PyTorch's
    engine of the same kind (none and selective against eager, full against checkpointing), and
    every engine's step time against its own without recompute."""
    memory = result["memory"]
    seqs = sorted(memory)
    lines = [
        "| engine | "
        + " | ".join(f"seq {s}: peak RSS (MB) | ms/step | over its none's time" for s in seqs)
        + " |",
        "|---|" + "---:|---:|---:|" * len(seqs),
    ]
    for engine in memory[seqs[0]]:
        base = "PyTorch eager" if engine.startswith("PyTorch") else "ours native"
        cells = []
        for s in seqs:
            r, none = memory[s][engine], memory[s][base]
            if "error" in r:
                cells += [f"failed: {r['error']}", "-", "-"]
                continue
            ms, base_ms = _step_ms(r), _step_ms(none) if "error" not in none else None
            overhead = f"{ms / base_ms - 1:+.0%}" if ms and base_ms and engine != base else "-"
            cells += [f"{r['peak_rss'] / 2**20:,.0f}", f"{ms:,.0f}", overhead]
        lines.append(f"| {engine} | " + " | ".join(cells) + " |")
    return lines


def main(
    names: list[str], quick: bool, command: str, json_path: str | None, markdown_path: str | None
) -> int:
    names = names or list(CONFIGS)
    header, date, threads = report.run_heading(command)
    _say(header)
    lines = [header, ""]
    results = []
    with tempfile.TemporaryDirectory(prefix="long_sequences_") as tmp:
        for name in names:
            spec = CONFIGS[name]
            folder = Path(tmp) / name
            folder.mkdir()
            result = run_config(name, spec, spec["quick_seqs" if quick else "seqs"], threads, folder)
            results.append(result)
            part = [f"**{name}**: {result['title']}; batch 1; steps {STEPS} (the first a warm-up)", ""]
            part += table(result) + [""]
            _say("\n".join(part))
            lines += part
    report.write_run(command, date, results, lines, json_path, markdown_path)
    return 0
