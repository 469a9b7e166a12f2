"""``python -m ort_ascend_ops bench fine_tuning [lora] [packing]``: what fine-tuning costs.

- **lora**: a Hugging Face Llama trained in full and with LoRA adapters (r 16 on every linear
  layer, PEFT's), ours native against PyTorch eager + PEFT on the same weights and batch: peak RSS
  and ms/step, and our training graph's node count and weight-gradient products for each.
- **packing**: chat examples of log-normal lengths (``examples.chat.write_varied_examples``)
  trained one a padded row and packed with per-document attention (``--pack``), ours native:
  the padding share, ms/step and tokens/s of the examples' own tokens (padding not counted).

Every engine runs its steps in a child process of its own (``training_memory``): the first step
is a warm-up, the median of the others is reported."""

from __future__ import annotations

import statistics
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from . import report, training_memory

STEPS = 3  # one warm-up
LORA: dict[str, Any] = {"r": 16, "lora_alpha": 32, "target_modules": "all-linear"}
SPECS: dict[str, dict[str, Any]] = {
    "lora": {
        "title": "HF Llama, hidden 768, intermediate 2048, 6 layers, 12 heads / 4 kv heads, vocab 32000",
        "config": dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=6,
                       num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=512),
        "quick": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=512),
        "batch": 2, "seq": 256, "quick_seq": 32,
    },
    "packing": {
        "title": "HF Llama, hidden 256, intermediate 688, 4 layers, 4 heads / 2 kv heads, a BPE vocabulary of 2048",
        "config": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=1024),
        "quick": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, max_position_embeddings=128),
        "batch": 4, "seq": 1024, "quick_seq": 128, "examples": 400,
    },
}  # fmt: skip


def _say(text: str) -> None:
    print(text, flush=True)


def _ms(result: dict) -> float:
    """The median ms/step after the warm-up (NaN for a failed run)."""
    seconds = result.get("seconds", [])[1:]
    return 1e3 * statistics.median(seconds) if seconds else float("nan")


def _artifacts(exported, folder: Path) -> dict:
    """Ours' artifacts of an export and its training graph's size."""
    import onnx

    from ..training.artifacts import generate_artifacts
    from ..training.optim import AdamW

    paths = generate_artifacts(exported, loss=None, optimizer=AdamW(), artifact_directory=folder)
    graph = onnx.load(paths["training"], load_external_data=False).graph
    products = sum(n.op_type in ("MatMul", "Gemm") for n in graph.node)
    return {"paths": {k: str(v) for k, v in paths.items()}, "nodes": len(graph.node), "products": products}


def lora(quick: bool, threads: int, folder: Path) -> dict:
    """Full fine-tune and LoRA, ours and PyTorch (+ PEFT)."""
    import peft
    import torch
    import transformers

    from ..export import export_torch

    spec = SPECS["lora"]
    config = spec["config"] | (spec["quick"] if quick else {})
    seq = spec["quick_seq"] if quick else spec["seq"]
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(**config))
    weights = folder / "weights.pt"
    torch.save(model.state_dict(), weights)
    ids = np.random.default_rng(0).integers(0, config["vocab_size"], (spec["batch"], seq), dtype=np.int64)
    batch = folder / "batch.npy"
    np.save(batch, ids)
    tensor = torch.from_numpy(ids)
    feeds = {"input_ids": tensor, "labels": tensor.clone()}
    job = {"seq": seq, "threads": threads, "steps": STEPS, "batch": str(batch), "weights": str(weights)}
    job |= {"architecture": "LlamaConfig", "config": config}
    rows = {}
    for kind in ("full", "LoRA"):
        subject = model if kind == "full" else peft.get_peft_model(model, peft.LoraConfig(**LORA))
        built = _artifacts(export_torch(subject, feeds), folder / kind)
        ours = training_memory.measure(
            job | {"engine": f"ours native {kind}", "paths": built["paths"]}, folder
        )
        theirs = training_memory.measure(
            job | {"engine": f"PyTorch eager {kind}", "lora": LORA if kind == "LoRA" else None}, folder
        )
        rows[kind] = {"ours": ours, "torch": theirs, "nodes": built["nodes"], "products": built["products"]}
        _say(f"  {kind}: ours {_cell(ours)}; PyTorch {_cell(theirs)}; {built['nodes']:,} nodes")
        if kind == "LoRA":
            model = subject.unload()
    parameters = sum(p.numel() for p in model.parameters())
    return {
        "title": spec["title"],
        "batch": spec["batch"],
        "seq": seq,
        "parameters": parameters,
        "rows": rows,
    }


def packing(quick: bool, threads: int, folder: Path) -> dict:
    """Padded and packed rows of the same examples, ours native."""
    from ..examples.chat import write_varied_examples
    from ..examples.hf_models import write_model_directory
    from ..trainer import Settings, open_model
    from ..trainer.chat_data import Examples

    spec = SPECS["packing"]
    seq = spec["quick_seq"] if quick else spec["seq"]
    sizes = spec["config"] | (spec["quick"] if quick else {})
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [p.read_text() for p in sorted((stdlib / "email").glob("*.py"))]
    directory = folder / "model"
    write_model_directory(directory, texts, "llama", vocab_size=2048, sizes=sizes)
    data = write_varied_examples(folder / "chat.jsonl", spec["examples"], most_words=seq // 2)
    rows = {}
    for pack in (False, True):
        settings = Settings(model=str(directory), data=(str(data),), batch=spec["batch"], seq=seq, pack=pack)
        source = open_model(directory)
        source.check(settings)
        source.load(lambda text: None)
        examples = Examples.from_paths([str(data)], source.tokenizer, seq, pack=pack)
        chosen = examples.rows("train", 0, spec["batch"], seq)
        names = source.input_names()
        batch = folder / f"batch_{pack}.npz"
        named: dict[str, Any] = dict(zip(names, chosen.feeds(names), strict=True))
        np.savez(batch, **named)
        tokenizer: Any = source.tokenizer
        pad = tokenizer.eos_token_id
        tokens = int((chosen.ids != pad).sum())
        built = _artifacts(source.export(settings), folder / f"pack_{pack}")
        job = {"seq": seq, "threads": threads, "steps": STEPS, "batch": str(batch)}
        name = "packed" if pack else "padded"
        result = training_memory.measure(
            job | {"engine": f"ours native {name}", "paths": built["paths"]}, folder
        )
        rows[name] = {
            "result": result,
            "tokens": tokens,
            "padding": examples.padding(),
            "rows": len(chosen.ids),
        }
        _say(f"  {name}: {_cell(result)}; {examples.padding():.0%} padding; {tokens:,} example tokens a step")
    return {
        "title": spec["title"],
        "batch": spec["batch"],
        "seq": seq,
        "examples": spec["examples"],
        "rows": rows,
    }


def _cell(result: dict) -> str:
    if "error" in result:
        return f"failed: {result['error']}"
    return f"peak {result['peak_rss'] / 2**20:,.0f} MB, {_ms(result):,.0f} ms/step"


def tables(results: dict) -> list[str]:
    lines = []
    if "lora" in results:
        r = results["lora"]
        lines += [f"**lora**: {r['title']} ({r['parameters']:,} parameters); batch {r['batch']} x seq {r['seq']}; "
                  f"LoRA r {LORA['r']} alpha {LORA['lora_alpha']} on every linear layer", "",
                  "| fine-tune | ours: peak RSS (MB) | ms/step | PyTorch (+ PEFT): peak RSS (MB) | ms/step | "
                  "ours over PyTorch's time | training graph: nodes | MatMul/Gemm |", "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for kind, row in r["rows"].items():
            ours, theirs = row["ours"], row["torch"]
            cells = []
            for result in (ours, theirs):
                ok = "error" not in result
                cells += [
                    f"{result['peak_rss'] / 2**20:,.0f}" if ok else "failed",
                    f"{_ms(result):,.0f}" if ok else "-",
                ]
            ratio = _ms(ours) / _ms(theirs)
            lines.append(f"| {kind} | " + " | ".join(cells) + f" | {'-' if ratio != ratio else f'{ratio:.2f}x'} | "
                         f"{row['nodes']:,} | {row['products']:,} |")  # fmt: skip
        lines.append("")
    if "packing" in results:
        r = results["packing"]
        lines += [f"**packing**: {r['title']}; batch {r['batch']} x seq {r['seq']}; {r['examples']} chat examples, "
                  "a user turn of log-normal length (median 24 words) and an answer (median 80 words), sigma 0.9", "",
                  "| rows | padding share (all rows) | examples' tokens a step | ms/step | tokens/s | over padded |",
                  "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        rates = {name: row["tokens"] / _ms(row["result"]) * 1e3 for name, row in r["rows"].items()}
        for name, row in r["rows"].items():
            ms, over = _ms(row["result"]), rates[name] / rates["padded"]
            lines.append(f"| {name} | {row['padding']:.0%} | {row['tokens']:,} | {ms:,.0f} | {rates[name]:,.0f} | "
                         f"{over:.2f}x |")  # fmt: skip
        lines.append("")
    return lines


def main(
    names: list[str], quick: bool, command: str, json_path: str | None, markdown_path: str | None
) -> int:
    names = names or list(SPECS)
    header, date, threads = report.run_heading(command)
    _say(header)
    results = {}
    with tempfile.TemporaryDirectory(prefix="fine_tuning_") as tmp:
        for name in names:
            folder = Path(tmp) / name
            folder.mkdir()
            _say(f"\n## {name}")
            results[name] = {"lora": lora, "packing": packing}[name](quick, threads, folder)
    lines = [header, "", *tables(results)]
    _say("\n".join(lines))
    report.write_run(command, date, results, lines, json_path, markdown_path)
    return 0
