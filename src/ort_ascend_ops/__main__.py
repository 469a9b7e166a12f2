"""Command line: ``python -m ort_ascend_ops {demo,train,bench,docs}``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys


def _bench(args: argparse.Namespace) -> int:
    if args.from_command_line and "OPENBLAS_THREAD_TIMEOUT" not in os.environ:
        # NumPy's OpenBLAS workers spin ~0.1 s after each multi-threaded sgemm of the roof and take
        # a core from the kernel timed next (measured 1.2x slower). OpenBLAS reads the timeout only
        # when it loads, which NumPy has done by now: run again with the shortest one. (Only as a
        # command: main() called from Python must not replace its caller's process.)
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"
        os.execv(sys.executable, [sys.executable, "-m", "ort_ascend_ops", *args.argv])
    if args.ops[:1] == ["training_step"]:  # whole training steps of models, not the per-op table
        from .bench import data_parallel, training_step

        threads = list(dict.fromkeys(int(t) for t in args.threads.split(",")))
        command = shlex.join(["python", "-m", "ort_ascend_ops", *args.argv])
        steps, warmup = (3, 1) if args.quick else (args.repeats, 2)
        if args.nproc:
            nprocs = list(dict.fromkeys(int(n) for n in args.nproc.split(",")))
            return data_parallel.main(args.ops[1:], nprocs, steps, warmup, command, args.json, args.markdown)
        from .training.precision import PRECISIONS

        precisions = list(dict.fromkeys(["fp32", *args.precision.split(",")]))
        unknown = [p for p in precisions if p not in PRECISIONS]
        if unknown:
            print(f"bench: --precision takes {', '.join(PRECISIONS)}; got {unknown}", file=sys.stderr)
            return 2
        return training_step.main(
            args.ops[1:],
            threads,
            steps,
            warmup,
            args.peer_venv,
            True,
            command,
            args.json,
            args.markdown,
            precisions,
        )
    from .bench import ALIASES, BENCHES, CLIFFS, suite
    from .bench.runner import DTYPES

    names = [ALIASES.get(name, name) for name in args.ops] or [*BENCHES, CLIFFS]
    dtypes = args.dtypes.split(",")
    unknown = sorted(set(names) - {*BENCHES, CLIFFS}) + sorted(set(dtypes) - set(DTYPES))
    if unknown:
        choices = sorted([*BENCHES, CLIFFS]) + sorted(ALIASES)
        print(
            f"unknown benchmarks or dtypes {unknown}; choose from {choices} and {list(DTYPES)}",
            file=sys.stderr,
        )
        return 2
    threads = list(dict.fromkeys(int(t) for t in args.threads.split(",")))
    if min(threads) < 1:
        print("thread counts must be at least 1", file=sys.stderr)
        return 2
    command = shlex.join(["python", "-m", "ort_ascend_ops", *args.argv])
    repeats = min(args.repeats, 3) if args.quick else args.repeats
    suite.run(names, threads, dtypes, args.quick, repeats, command, args.json, args.markdown, args.png)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import main

    return main(
        steps=args.steps,
        seed=args.seed,
        threads=args.threads or None,
        lm_steps=args.lm_steps,
        out=args.out,
        warmup_steps=args.warmup_steps,
    )


def _train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .training import distributed, hf_dir
    from .training.data import Corpus
    from .training.loop import Settings, SettingsError, summary, train

    try:
        settings = Settings(
            steps=args.steps,
            batch=args.batch,
            seq=args.seq,
            lr=args.lr,
            out=Path(args.out),
            resume=args.resume,
            save_every=args.save_every,
            eval_every=args.eval_every,
            warmup=args.warmup_steps,
            seed=args.seed,
            threads=args.threads or None,
            precision=args.precision,
            max_grad_norm=args.max_grad_norm,
            grad_accum=args.grad_accum,
            lr_scheduler=args.lr_scheduler,
            weight_decay=args.weight_decay,
            zero=args.zero,
            collective_timeout=args.collective_timeout,
        )
        model = hf_dir.load(args.model) if hf_dir.is_model_directory(args.model) else Path(args.model)
        tokenizer = getattr(model, "tokenizer", None)
        corpus = (
            Corpus.from_paths(args.data, tokenizer=tokenizer)
            if args.data
            else Corpus.python_stdlib(tokenizer=tokenizer)
        )
        rank, world = distributed.environment()
        if rank == 0:
            print(f"data: {corpus.describe()}")
        if not isinstance(model, hf_dir.HfModel) and not model.is_file():
            raise SettingsError(f"{model}: no such ONNX model or Hugging Face directory")
        history = train(model, corpus, settings)
    except (SettingsError, ValueError, OSError) as error:  # hf_dir's and the data's errors are ValueErrors
        print(f"train: {error}", file=sys.stderr)
        return 2
    except distributed.RankLostError as error:
        print(f"train: {error}", file=sys.stderr)
        return 1
    finally:
        distributed.leave()
    if rank == 0:
        print(summary(history, settings, world))
    return 0


def _docs(args: argparse.Namespace) -> int:
    from .opschema import docs_markdown

    sys.stdout.write(docs_markdown())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ort_ascend_ops", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo",
        help="train a byte-level Hugging Face Llama on Python's sources, DeepSeek-V3.2's indexer warm-up and the indexer loss; time the ops; check the gradients",
    )
    demo.add_argument("--lm-steps", type=int, default=300, help="AdamW steps of the byte-level Llama")
    demo.add_argument(
        "--warmup-steps", type=int, default=30, help="AdamW steps of the DeepSeek-V3.2 indexer warm-up"
    )
    demo.add_argument("--steps", type=int, default=20, help="SGD steps of the indexer loss")
    demo.add_argument("--out", default="demo-output", help="folder for the loss curve, CSV and checkpoint")
    demo.add_argument("--seed", type=int, default=0, help="seed of the inputs and initial weights")
    demo.add_argument(
        "--threads", type=int, default=1, help="intra-op thread count (0: ONNX Runtime's default)"
    )
    demo.set_defaults(func=_demo)

    train = commands.add_parser(
        "train", help="train a language-model export on bytes of text (AdamW, checkpoints, loss curve)"
    )
    train.add_argument(
        "model",
        help="a Hugging Face causal-LM directory (config.json, safetensors weights, tokenizer files), or an "
        "ONNX model whose integer inputs take token ids and whose output 'loss' is the loss",
    )
    train.add_argument(
        "--data",
        nargs="+",
        help="text files, .jsonl files (a 'text' field per line), folders, globs, or a datasets save_to_disk "
        "folder (default: this Python's standard library sources)",
    )
    train.add_argument(
        "--steps", type=int, default=300, help="total optimizer steps (a resumed run included)"
    )
    train.add_argument(
        "--batch", type=int, default=8, help="sequences per step (of each process under torchrun)"
    )
    train.add_argument("--seq", type=int, default=128, help="tokens per sequence")
    train.add_argument(
        "--grad-accum", type=int, default=1, help="micro-batches of --batch per step, averaged"
    )
    train.add_argument("--lr", type=float, default=1e-3, help="peak learning rate, reached after the warm-up")
    train.add_argument(
        "--lr-scheduler", default="linear", help="after the warm-up: linear (to 0), cosine (to 0) or constant"
    )
    train.add_argument(
        "--warmup-steps", type=int, default=None, help="linear warm-up steps (default: a tenth)"
    )
    train.add_argument("--weight-decay", type=float, default=0.01, help="AdamW's decoupled weight decay")
    train.add_argument("--out", default="train-output", help="folder for artifacts, checkpoint, CSV and PNG")
    train.add_argument("--resume", action="store_true", help="go on from the checkpoint in --out")
    train.add_argument("--save-every", type=int, default=100, help="checkpoint every this many steps")
    train.add_argument("--eval-every", type=int, default=50, help="held-out loss every this many steps")
    train.add_argument("--seed", type=int, default=0, help="seed of the batch positions")
    train.add_argument(
        "--precision",
        default="fp32",
        help="fp32, bf16-mixed or fp16-mixed (torch.autocast over float32 weights; fp16 with dynamic loss scaling)",
    )
    train.add_argument(
        "--max-grad-norm", type=float, default=1.0, help="clip the gradients' total 2-norm to this (0: off)"
    )
    train.add_argument(
        "--threads", type=int, default=0, help="intra-op thread count (0: ONNX Runtime's default)"
    )
    train.add_argument(
        "--zero",
        type=int,
        default=0,
        help="under torchrun, 1 shards the AdamW states over the processes (ZeRO stage 1)",
    )
    train.add_argument(
        "--collective-timeout",
        type=float,
        default=300.0,
        help="under torchrun, seconds a collective waits for a stalled process before failing "
        "(a killed one fails it at once)",
    )
    train.set_defaults(func=_train)

    bench = commands.add_parser(
        "bench",
        help="time the native kernels against the inlined reference, the peers and same-run rooflines",
    )
    bench.add_argument(
        "ops",
        nargs="*",
        help="benchmarks to run (default: all); 'cliffs' times power-of-two widths against nearby ones; "
        "'training_step [CONFIG ...]' times whole training steps",
    )
    bench.add_argument(
        "--threads",
        default=f"1,{os.cpu_count()}",
        help="comma-separated intra-op thread counts (default: 1,all)",
    )
    bench.add_argument(
        "--dtypes", default="float32,bfloat16", help="comma-separated: float32, bfloat16, float16"
    )
    bench.add_argument(
        "--repeats",
        type=int,
        default=15,
        help="most timed runs per case (fewer for large cases; median reported)",
    )
    bench.add_argument(
        "--quick", action="store_true", help="small shapes, 3 repeats (CI smoke test, < 1 min)"
    )
    bench.add_argument("--json", help="write every result, the machine and the versions to this JSON file")
    bench.add_argument(
        "--markdown", help="write the results tables to this Markdown file (docs/PERFORMANCE.md)"
    )
    bench.add_argument(
        "--peer-venv",
        help="training_step: venv with onnxruntime-training 1.19.2 (default: $ORT_ASCEND_OPS_ORTTRAINING_VENV)",
    )
    bench.add_argument(
        "--precision",
        default="fp32",
        help="training_step: comma-separated precisions beside fp32 (bf16-mixed, fp16-mixed): ours native "
        "and PyTorch eager under torch.autocast at each",
    )
    bench.add_argument(
        "--nproc",
        help="training_step: comma-separated process counts (1,2): data parallel under torchrun, ours "
        "(with and without ZeRO-1) against PyTorch DDP (with and without ZeroRedundancyOptimizer)",
    )
    bench.add_argument("--png", help="chart the fraction of the roofline per op and case (needs matplotlib)")
    bench.set_defaults(func=_bench)

    commands.add_parser("docs", help="print the operator reference (docs/OPS.md)").set_defaults(func=_docs)

    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.from_command_line = argv is None
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
