"""``python -m ort_ascend_ops bench training_step``: one whole training step (forward, backward,
AdamW update) of a Hugging Face Llama (and a Mixtral, its experts as transformers runs them by
default), in tokens per second, on each engine a user could train it
with on the CPU, at each thread count, in one run:

- ours, native: ``export_torch`` -> ``generate_artifacts`` -> ``training.api`` Module/Optimizer;
- ours, portable: the same artifacts with ``native=False`` (the reference functions inlined);
- PyTorch eager with ``torch.optim.AdamW`` (same weights, same batch, ``torch.set_num_threads``);
- torch.compile: the same with the model under ``torch.compile`` (inductor's default mode; its
  compilation falls in the warm-up steps);
- with ``--precision bf16-mixed,fp16-mixed``, ours native on artifacts of that precision beside
  PyTorch eager under ``torch.autocast`` (and ``GradScaler`` for fp16), on the same weights;
- onnxruntime-training 1.19.2, in its own venv (``--peer-venv`` or ``ORT_ASCEND_OPS_ORTTRAINING_VENV``),
  run as a subprocess since it cannot share a process with current ONNX Runtime; for the Llamas only
  (its TorchScript export would trace the routing of one batch into a MoE's graph).

The in-process engines take turns step by step (``timing.measure``) so that they see the same
noisy machine; the median of the timed steps after warm-up is reported. Then ONNX Runtime's
profiler gives, for ours native, each op type's share of the training session's run and the
optimizer session's total. The models come from transformers through torch's export (the
``[torch]`` extra); without it only ours runs, on the configs with a committed export
(byte_llama)."""

from __future__ import annotations

import copy
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..domain import DOMAIN
from . import cpu, peers, report, training_memory
from .timing import measure

VENV_ENV = "ORT_ASCEND_OPS_ORTTRAINING_VENV"
PEER_SCRIPT = Path(__file__).with_name("_orttraining_peer.py")
PEER_VENV = "/tmp/ortt"  # where PEER_SETUP puts it
PEER_SETUP = (
    f"python3.11 -m venv {PEER_VENV} && {PEER_VENV}/bin/pip install onnxruntime-training==1.19.2 "
    "onnx==1.16.2 'numpy<2' torch transformers --extra-index-url https://download.pytorch.org/whl/cpu"
)
ENGINES = ("ours native", "ours portable", "PyTorch eager", "torch.compile", "onnxruntime-training")
# The engines a mixed precision adds, each named with it ("ours native bf16-mixed").
MIXED_ENGINES = ("ours native", "PyTorch eager")


def _needs_torch(engine: str) -> bool:
    """Whether ``engine`` (a name of ENGINES or training_memory.ENGINES, or one with a precision
    after it) is a PyTorch model's: ours run the ONNX artifacts alone."""
    return not engine.startswith("ours")


def _baseline(engine: str) -> str:
    """The engine a row's speed and memory are compared with: ours native of the same precision."""
    p = training_memory.precision_of(engine)
    return "ours native" if p == "fp32" else f"ours native {p}"


MEMORY_STEPS = 2  # our optimizer states exist from the start, torch's from its first step


def _llama(hidden: int, intermediate: int, memory_seqs: list[int]) -> dict:
    """A 4-layer HF Llama of 8 query heads over 2 key-value heads (issue 33's), vocab 32000."""
    return {
        "title": f"HF Llama, hidden {hidden}, intermediate {intermediate}, 4 layers, 8 heads / 2 kv heads, vocab 32000",
        "config": dict(
            vocab_size=32000,
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=2,
            max_position_embeddings=1024,
            tie_word_embeddings=False,
            use_cache=False,
        ),
        "batch": 2,
        "seq": 256,
        "memory_seqs": memory_seqs,
    }


def _configs() -> dict[str, dict]:
    from ..examples import byte_llama

    return {
        "llama512": _llama(512, 1376, memory_seqs=[256, 1024]),
        "llama768": _llama(768, 2048, memory_seqs=[256, 1024]),
        "byte_llama": {
            "title": "the demo's byte Llama (examples.byte_llama.CONFIG)",
            "config": dict(byte_llama.CONFIG),
            "export": byte_llama.model_path,  # the committed one: ours run it without torch
            "batch": byte_llama.BATCH,
            "seq": byte_llama.SEQUENCE,
        },
        "mixtral256": {
            "title": "HF Mixtral, hidden 256, 8 experts of intermediate 512 (2 per token), 4 layers, 8 heads / 4 kv heads, vocab 8000",
            "architecture": "MixtralConfig",
            "config": dict(
                vocab_size=8000,
                hidden_size=256,
                intermediate_size=512,
                num_hidden_layers=4,
                num_attention_heads=8,
                num_key_value_heads=4,
                num_local_experts=8,
                num_experts_per_tok=2,
                max_position_embeddings=1024,
                use_cache=False,
            ),
            "batch": 2,
            "seq": 256,
        },
    }


def _say(text: str) -> None:
    print(text, flush=True)


class _Ours:
    """ours native or portable: the artifacts' Module and Optimizer at ``threads``."""

    def __init__(
        self,
        paths: dict,
        threads: int,
        native: bool,
        ids: np.ndarray,
        options=None,
        optimizer_options=None,
        zero: int = 0,
        process_group=None,
        device: str = "cpu",
    ):
        from ..training.api import CheckpointState, Module, Optimizer

        self.ids = ids
        state = CheckpointState.load_checkpoint(paths["checkpoint"], device=device)
        self.module = Module(
            paths["training"],
            state,
            device=device,
            threads=threads,
            native=native,
            session_options=options,
            process_group=process_group,
        )
        self.optimizer = Optimizer(
            paths["optimizer"], self.module, session_options=optimizer_options, zero=zero
        )
        self.losses: list[float] = []

    def __call__(self) -> None:
        loss = self.module(self.ids, self.ids)
        self.optimizer.step()
        self.module.lazy_reset_grad()
        self.losses.append(float(loss[0] if isinstance(loss, tuple) else loss))


class _Torch:
    """PyTorch eager, or the model under torch.compile (``compiled``), at ``precision``
    (``training_memory.TorchStep``)."""

    def __init__(self, model, threads: int, ids: np.ndarray, compiled: bool = False, precision: str = "fp32"):
        torch = peers.torch_module()
        self.torch, self.threads = torch, threads
        model = copy.deepcopy(model).train()
        self.step = training_memory.TorchStep(torch.compile(model) if compiled else model, precision)
        self.ids = torch.from_numpy(ids)
        self.losses: list[float] = []

    def __call__(self) -> None:
        self.torch.set_num_threads(self.threads)
        self.losses.append(self.step(self.ids))


def _profile_shares(
    paths: dict, threads: int, ids: np.ndarray, steps: int, folder: Path, our_ops: set[str]
) -> dict:
    """ONNX Runtime's profile of ours native: per op type, its share of the training session's
    runs; the optimizer session's time per step."""
    from ..training.api import training_session_options

    options = {}
    for which in ("train", "optimizer"):  # one profile file per session
        options[which] = training_session_options(threads=threads, native=True)
        options[which].enable_profiling = True
        options[which].profile_file_prefix = str(folder / f"profile_{which}_{threads}")
    engine = _Ours(paths, threads, True, ids, options["train"], options["optimizer"])
    for _ in range(steps + 1):
        engine()
    assert engine.optimizer.session is not None  # one process updates every parameter
    files = {
        "train": engine.module.training_session.end_profiling(),
        "optimizer": engine.optimizer.session.end_profiling(),
    }
    out: dict[str, object] = {}
    for which, file in files.items():
        events = json.load(open(file))
        runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
        # The first run is a warm-up: only the nodes after its end count.
        after = runs[0]["ts"] + runs[0]["dur"] if runs else 0
        runs = [e["dur"] for e in runs[1:]]
        by_op: dict[str, float] = defaultdict(float)
        for e in events:
            if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and e["ts"] > after:
                by_op[e["args"].get("op_name", "?")] += e["dur"]
        total = sum(runs)
        out[which] = {
            "run_ms": statistics.median(runs) / 1e3 if runs else 0.0,
            "shares": {op: d / total for op, d in sorted(by_op.items(), key=lambda kv: -kv[1])}
            if total
            else {},
            "kernel_share": sum(by_op.values()) / total if total else 0.0,
        }
        os.unlink(file)
    out["our_ops"] = sorted(our_ops)
    return out


def _peer(
    venv: str,
    config: dict,
    weights: Path,
    batch: Path,
    threads: Sequence[int],
    steps: int,
    warmup: int,
    folder: Path,
    memory: bool = False,
) -> dict:
    job = folder / "peer_job.json"
    job.write_text(
        json.dumps(
            {
                "config": config,
                "weights": str(weights),
                "batch": str(batch),
                "threads": list(threads),
                "steps": steps,
                "warmup": warmup,
                "work": str(folder / "orttraining"),
                "memory": memory,
            }
        )
    )
    python = Path(venv) / "bin" / "python"
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(python), str(PEER_SCRIPT), str(job)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return {
            "error": done.stderr.strip().splitlines()[-1]
            if done.stderr.strip()
            else f"exit {done.returncode}"
        }
    return json.loads(done.stdout.strip().splitlines()[-1])


def _peer_venv(given: str | None) -> tuple[str | None, str | None]:
    """The onnxruntime-training venv (``--peer-venv``, checked as it was parsed, or $VENV_ENV), or
    the line saying why there is none."""
    venv = given or os.environ.get(VENV_ENV)
    if not venv:
        why = f"no venv given: --peer-venv or ${VENV_ENV}"
    elif not (Path(venv) / "bin" / "python").exists():
        why = f"${VENV_ENV}: {venv}/bin/python does not exist"
    else:
        return venv, None
    install = f"in a venv of its own, {PEER_SETUP}, then --peer-venv {PEER_VENV}"
    return None, peers.absent("onnxruntime-training", install, "no onnxruntime-training rows", why)


def _without_torch(names: Sequence[str], configs: dict) -> dict[str, str]:
    """The line saying so for PyTorch and for transformers where absent: the models' export and
    every engine but ours need both."""
    missing = {} if peers.torch_module() is not None else {"PyTorch": peers.TORCH_INSTALL}
    if not peers.importable("transformers"):
        missing["transformers"] = peers.TRANSFORMERS_INSTALL
    committed = [n for n in names if "export" in configs[n]]
    skipped = [n for n in names if n not in committed]
    without = ["no PyTorch or onnxruntime-training rows"]
    without += [f"{', '.join(committed)} from the committed export"] if committed else []
    without += [f"{', '.join(skipped)} skipped (transformers models exported by torch)"] if skipped else []
    return {name: peers.absent(name, install, "; ".join(without)) for name, install in missing.items()}


def build_model(spec: dict):
    """The config's transformers model, its weights drawn from seed 0."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = getattr(transformers, spec.get("architecture", "LlamaConfig"))(**spec["config"])
    return transformers.AutoModelForCausalLM.from_config(config)


def export_model(model, ids: np.ndarray):
    """``model`` exported with its loss as the demo exports (``examples.byte_llama.export``):
    opset 23, batch and sequence dynamic."""
    import torch

    from ..examples import byte_llama
    from ..training import export_torch

    x = torch.from_numpy(ids)
    dims = {0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")}
    return export_torch(
        model.eval(),
        {"input_ids": x, "labels": x.clone()},
        dynamic_shapes={"input_ids": dims, "labels": dims},
        opset=byte_llama.OPSET,
    )


def run_config(
    name: str,
    spec: dict,
    threads: Sequence[int],
    steps: int,
    warmup: int,
    venv: str | None,
    profile: bool,
    folder: Path,
    precisions: Sequence[str] = ("fp32",),
    with_torch: bool = True,
) -> dict:
    """``with_torch=False``: ours alone, on the config's committed export."""
    import onnx

    from ..export import parameter_names
    from ..training.artifacts import generate_artifacts
    from ..training.optim import AdamW

    batch, seq = spec["batch"], spec["seq"]
    tokens = batch * seq
    _say(f"\n## {name}: {spec['title']}; batch {batch} x seq {seq} = {tokens} tokens/step")
    architecture = spec.get("architecture", "LlamaConfig")
    model = build_model(spec) if with_torch else None
    ids = np.random.default_rng(0).integers(0, spec["config"]["vocab_size"], (batch, seq), dtype=np.int64)
    start = time.perf_counter()
    exported = onnx.load(spec["export"]()) if model is None else export_model(model, ids)
    export_s = time.perf_counter() - start
    trained = set(parameter_names(exported) or ())
    n_params = sum(int(np.prod(i.dims)) for i in exported.graph.initializer if i.name in trained)
    start = time.perf_counter()
    paths = generate_artifacts(exported, loss=None, optimizer=AdamW(), artifact_directory=folder / "ours")
    artifacts_s = time.perf_counter() - start
    mixed = {
        p: generate_artifacts(
            exported, loss=None, optimizer=AdamW(), artifact_directory=folder / f"ours-{p}", precision=p
        )
        for p in precisions
        if p != "fp32"
    }
    training = onnx.load(paths["training"], load_external_data=False)
    our_ops = {n.op_type for n in training.graph.node if n.domain == DOMAIN}
    source = (
        f"export {export_s:.1f} s" if model is not None else f"committed export loaded in {export_s:.1f} s"
    )
    _say(
        f"{n_params / 1e6:.1f} M parameters; ours: {source}, artifacts {artifacts_s:.1f} s, "
        f"training graph {len(training.graph.node)} nodes (our ops: {', '.join(sorted(our_ops)) or 'none'})"
    )
    del training
    result = {
        "name": name,
        "title": spec["title"],
        "batch": batch,
        "seq": seq,
        "tokens": tokens,
        "parameters": n_params,
        "runs": {},
        "profile": {},
    }
    for n in threads:
        makers: dict[str, Callable[[], _Ours | _Torch]] = {
            "ours native": functools.partial(_Ours, paths, n, True, ids),
            "ours portable": functools.partial(_Ours, paths, n, False, ids),
            "PyTorch eager": functools.partial(_Torch, model, n, ids),
            "torch.compile": functools.partial(_Torch, model, n, ids, compiled=True),
        }
        for p, mixed_paths in mixed.items():
            makers[f"ours native {p}"] = functools.partial(_Ours, mixed_paths, n, True, ids)
            makers[f"PyTorch eager {p}"] = functools.partial(_Torch, model, n, ids, precision=p)
        engines = {e: make() for e, make in makers.items() if model is not None or not _needs_torch(e)}
        timings = measure(*engines.values(), repeats=steps, warmup=warmup)
        for engine_name, engine, timing in zip(engines, engines.values(), timings, strict=True):
            result["runs"][(engine_name, n)] = {
                "median_s": timing.median,
                "spread": timing.spread,
                "steps": timing.repeats,
                "first_loss": engine.losses[0],
            }
        del engines
        _say(
            f"threads {n}: "
            + "; ".join(f"{e} {r['median_s'] * 1e3:.0f} ms" for (e, t), r in result["runs"].items() if t == n)
        )
    if venv and model is not None and architecture == "LlamaConfig":
        import torch

        weights, batch_file = folder / "weights.pt", folder / "batch.npy"
        torch.save(model.state_dict(), weights)
        np.save(batch_file, ids)
        peer = _peer(venv, spec["config"], weights, batch_file, threads, steps, warmup, folder)
        if "error" in peer:
            result["peer_error"] = peer["error"]
            _say(f"onnxruntime-training failed: {peer['error']}")
        for r in peer.get("runs", []):
            result["runs"][("onnxruntime-training", r["threads"])] = r
    if profile:
        for n in threads:
            result["profile"][n] = _profile_shares(paths, n, ids, max(3, steps // 2), folder, our_ops)
    result["memory"] = _memory(spec, model, {"fp32": paths, **mixed}, max(threads), venv, folder)
    return result


def _memory(spec: dict, model, paths: dict[str, dict], threads: int, venv: str | None, folder: Path) -> dict:
    """Each engine's peak RSS over MEMORY_STEPS steps, in a child process of its own, at each of
    the config's memory sequence lengths: {seq: {engine: {"peak_rss", "losses"} or {"error"}}}.
    ``model`` None: ours alone."""
    weights = folder / "weights.pt"
    if model is not None:
        import torch

        torch.save(model.state_dict(), weights)
    architecture = spec.get("architecture", "LlamaConfig")
    out: dict[int, dict[str, dict]] = {}
    for seq in spec.get("memory_seqs", [spec["seq"]]):
        rng = np.random.default_rng(seq)
        batch_file = folder / f"batch_{seq}.npy"
        np.save(
            batch_file, rng.integers(0, spec["config"]["vocab_size"], (spec["batch"], seq), dtype=np.int64)
        )
        job = {"seq": seq, "threads": threads, "steps": MEMORY_STEPS, "batch": str(batch_file)}
        job |= {"weights": str(weights), "architecture": architecture, "config": spec["config"]}
        engines = [*training_memory.ENGINES]
        engines += [f"{e} {p}" for p in paths if p != "fp32" for e in MIXED_ENGINES]
        engines = [e for e in engines if model is not None or not _needs_torch(e)]
        out[seq] = {
            e: training_memory.measure(
                job
                | {
                    "engine": e,
                    "paths": {k: str(v) for k, v in paths[training_memory.precision_of(e)].items()},
                },
                folder,
            )
            for e in engines
        }
        if venv and model is not None and architecture == "LlamaConfig":
            peer = _peer(venv, spec["config"], weights, batch_file, [threads], MEMORY_STEPS, 0, folder, True)
            losses = [r["first_loss"] for r in peer.get("runs", [])]
            out[seq]["onnxruntime-training"] = (
                {"error": peer["error"]}
                if "error" in peer
                else {"peak_rss": peer["peak_rss"], "losses": losses}
            )
        _say(
            f"peak RSS, seq {seq}, {threads} threads: "
            + "; ".join(
                f"{e} {r['peak_rss'] / 2**20:.0f} MB" if "peak_rss" in r else f"{e} failed: {r['error']}"
                for e, r in out[seq].items()
            )
        )
    return out


def _memory_lines(result: dict) -> list[str]:
    memory = result["memory"]
    seqs = sorted(memory)
    engines = list(dict.fromkeys(e for s in seqs for e in memory[s]))
    if not engines:
        return []
    growth_header = f" growth seq {seqs[0]} -> {seqs[-1]} |" if len(seqs) > 1 else ""
    lines = [
        "| engine | "
        + " | ".join(f"peak RSS, seq {s} (MB) | vs ours native" for s in seqs)
        + " |"
        + growth_header,
        "|---|" + "---:|---:|" * len(seqs) + ("---:|" if growth_header else ""),
    ]
    for engine in engines:
        cells = []
        for s in seqs:
            r = memory[s].get(engine, {})
            rss, native = r.get("peak_rss"), memory[s].get(_baseline(engine), {}).get("peak_rss")
            cells += (
                [f"{rss / 2**20:.0f}", f"{rss / native:.2f}x" if native else "-"]
                if rss
                else [f"failed: {r['error']}" if "error" in r else "-", "-"]
            )
        if growth_header:
            first, last = (memory[s].get(engine, {}).get("peak_rss") for s in (seqs[0], seqs[-1]))
            cells.append(f"{(last - first) / 2**20:+.0f} MB" if first and last else "-")
        lines.append(f"| {engine} | " + " | ".join(cells) + " |")
    return lines


def _table(result: dict, threads: Sequence[int]) -> list[str]:
    tokens = result["tokens"]
    lines = [
        "| engine | "
        + " | ".join(
            f"{n} thread{'s' if n > 1 else ''}: ms/step (±spread) | tokens/s | ours native's speed vs it "
            "(of its precision)"
            for n in threads
        )
        + " | first loss |",
        "|---|" + "---:|---:|---:|" * len(threads) + "---:|",
    ]
    for engine in dict.fromkeys(e for e, _ in result["runs"]):
        cells, loss = [], None
        for n in threads:
            r = result["runs"].get((engine, n))
            native = result["runs"].get((_baseline(engine), n))
            if r is None:
                cells += ["-", "-", "-"]
                continue
            loss = r["first_loss"]
            ratio = "1.00x" if engine == _baseline(engine) else f"{r['median_s'] / native['median_s']:.2f}x"
            cells += [
                f"{r['median_s'] * 1e3:.0f} (±{r['spread'] * 100:.0f}%)",
                f"{tokens / r['median_s']:,.0f}",
                ratio,
            ]
        if any(c != "-" for c in cells):
            lines.append(
                f"| {engine} | " + " | ".join(cells) + f" | {'-' if loss is None else f'{loss:.4f}'} |"
            )
    return lines


def _profile_lines(result: dict, top: int) -> list[str]:
    lines = []
    for n, prof in result["profile"].items():
        train, opt = prof["train"], prof["optimizer"]
        shares = train["shares"]
        shown = list(shares)[:top] + [
            op for op in prof["our_ops"] if op in shares and op not in list(shares)[:top]
        ]
        text = ", ".join(f"{op} {shares[op] * 100:.1f}%" for op in shown)
        lines.append(
            f"- {n} thread{'s' if n > 1 else ''}, ours native (profiled, so slower): training session "
            f"{train['run_ms']:.0f} ms/run, kernels {train['kernel_share'] * 100:.0f}% of it: {text}. "
            f"Optimizer session {opt['run_ms']:.1f} ms/step "
            f"({opt['run_ms'] / (train['run_ms'] + opt['run_ms']) * 100:.0f}% of the profiled step)."
        )
    return lines


def main(
    names: Sequence[str],
    threads: Sequence[int],
    steps: int,
    warmup: int,
    peer_venv: str | None,
    profile: bool,
    command: str,
    json_path: str | None = None,
    markdown_path: str | None = None,
    precisions: Sequence[str] = ("fp32",),
) -> int:
    configs = _configs()
    names = list(names) or list(configs)
    absent = _without_torch(names, configs)
    with_torch = not absent
    runnable = [n for n in names if with_torch or "export" in configs[n]]
    if not runnable:
        print("\n".join([*absent.values(), f"training_step: none of {names} can run"]), file=sys.stderr)
        return 2
    venv, no_venv = _peer_venv(peer_venv)
    if no_venv:
        absent["onnxruntime-training"] = no_venv
    machine = report.machine()
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    _say(
        f"training_step: {cpu.summary(machine['cpu'])}; {machine['cores']} cores; threads {list(threads)}; {date}"
    )
    versions = machine["versions"]
    torch = f", torch {versions['torch']}" if with_torch else ""
    _say(f"onnxruntime {versions['onnxruntime']}{torch}; median of {steps} steps after {warmup} warm-up")
    for line in absent.values():
        _say(line)
    results = []
    lines = [f"`{command}` ({date}; {cpu.summary(machine['cpu'])}; {machine['cores']} cores)", ""]
    lines += [*(f"- {line}" for line in absent.values()), ""] if absent else []
    with tempfile.TemporaryDirectory(prefix="training_step_") as tmp:
        for name in runnable:
            folder = Path(tmp) / name
            folder.mkdir()
            result = run_config(
                name, configs[name], threads, steps, warmup, venv, profile, folder, precisions, with_torch
            )
            results.append(result)
            part = [
                f"**{name}**: {result['title']}; {result['parameters'] / 1e6:.1f} M parameters; batch "
                f"{result['batch']} x seq {result['seq']}",
                "",
                *_table(result, threads),
                "",
            ]
            part += _memory_lines(result) + [""]
            part += _profile_lines(result, 10) + [""]
            _say("\n".join(part))
            lines += part
    if json_path:
        serial = [
            {**r, "runs": [{"engine": e, "threads": t, **v} for (e, t), v in r["runs"].items()]}
            for r in results
        ]
        Path(json_path).write_text(
            json.dumps(
                {"command": command, "date": date, "machine": machine, "absent": absent, "results": serial},
                indent=2,
            )
        )
        _say(f"wrote {json_path}")
    if markdown_path:
        Path(markdown_path).write_text("\n".join(lines) + "\n")
        _say(f"wrote {markdown_path}")
    return 0
