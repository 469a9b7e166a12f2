"""Command line: ``python -m ort_ascend_ops {demo,train,bench,docs}``."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys


def _bench(args: argparse.Namespace) -> int:
    from .bench import ALIASES, BENCHES, CLIFFS, options

    # Every refusal comes before the run (and before the re-run below): none after minutes of it.
    training = args.ops[:1] == ["training_step"]
    npu = args.ops[:1] == ["npu_step"]
    fine = args.ops[:1] == ["fine_tuning"]
    kind = "nproc" if args.nproc else "recompute" if args.recompute else "training_step"
    run = kind if training else "npu_step" if npu else "fine_tuning" if fine else "ops"
    unread = options.unread(args, run)
    if unread:
        verb = "does" if len(unread) == 1 else "do"
        print(f"bench: {', '.join(unread)} {verb} not apply to {options.RUNS[run]}", file=sys.stderr)
        return 2
    if npu:  # one process on the NPU: no timing, so neither the re-run below nor threads
        from .bench import npu_step

        command = shlex.join(["python", "-m", "ort_ascend_ops", *args.argv])
        return npu_step.main(args.ops[1:], args.precision or [], command, args.json, args.markdown)
    if fine:  # whole training steps in child processes of their own, every core: no re-run below
        from .bench import fine_tuning

        names = list(dict.fromkeys(args.ops[1:]))
        unknown = sorted(set(names) - set(fine_tuning.SPECS))
        if unknown:
            print(
                f"bench: unknown fine_tuning parts {unknown}; choose from {sorted(fine_tuning.SPECS)}",
                file=sys.stderr,
            )
            return 2
        command = shlex.join(["python", "-m", "ort_ascend_ops", *args.argv])
        return fine_tuning.main(names, args.quick, command, args.json, args.markdown)
    if training:
        from .bench.long_sequences import CONFIGS
        from .bench.training_step import _configs

        names = list(dict.fromkeys(args.ops[1:]))
        choices = sorted(CONFIGS if args.recompute else _configs())
    else:
        names = list(dict.fromkeys(ALIASES.get(name, name) for name in args.ops)) or [*BENCHES, CLIFFS]
        choices = sorted([*BENCHES, CLIFFS]) + sorted(ALIASES)
    unknown = sorted(set(names) - set(choices))
    if unknown:
        kind = "training_step configs" if training else "benchmarks"
        print(f"bench: unknown {kind} {unknown}; choose from {choices}", file=sys.stderr)
        return 2
    if args.png and not set(names) & set(BENCHES):
        print("bench: --png charts the op benchmarks' rows, and cliffs alone has none", file=sys.stderr)
        return 2
    if args.from_command_line and "OPENBLAS_THREAD_TIMEOUT" not in os.environ:
        # NumPy's OpenBLAS workers spin ~0.1 s after each multi-threaded sgemm of the roof and take
        # a core from the kernel timed next (measured 1.2x slower). OpenBLAS reads the timeout only
        # when it loads, which NumPy has done by now: run again with the shortest one. (Only as a
        # command: main() called from Python must not replace its caller's process.)
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"
        os.execv(sys.executable, [sys.executable, "-m", "ort_ascend_ops", *args.argv])
    command = shlex.join(["python", "-m", "ort_ascend_ops", *args.argv])
    threads = args.threads or options.THREADS
    if training:  # whole training steps of models, not the per-op table
        from .bench import data_parallel, training_step

        steps, warmup = (3, 1) if args.quick else (args.repeats, 2)
        if args.nproc and args.device == "npu":
            from .bench import data_parallel_npu

            return data_parallel_npu.main(names, args.nproc, steps, warmup, command, args.json, args.markdown)
        if args.recompute:
            from .bench import long_sequences

            return long_sequences.main(names, args.quick, command, args.json, args.markdown)
        if args.nproc:
            return data_parallel.main(names, args.nproc, steps, warmup, command, args.json, args.markdown)
        precisions = args.precision or ["fp32"]
        return training_step.main(
            names, threads, steps, warmup, args.peer_venv, True, command, args.json, args.markdown, precisions
        )
    from .bench import suite

    repeats = min(args.repeats, 3) if args.quick else args.repeats
    dtypes = args.dtypes or options.DTYPES
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
    from .trainer import DataError, HistoryError, ModelError, SettingsError, TrainingError, train
    from .trainer.settings import from_arguments
    from .training.api.data_parallel import RankLostError, RankMismatchError, leave

    try:
        outcome = train(from_arguments(args))
    except (SettingsError, ModelError, DataError, HistoryError, RankMismatchError) as error:
        print(f"train: {error}", file=sys.stderr)
        return 2
    except (RankLostError, TrainingError) as error:
        print(f"train: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("train: interrupted; the run in --out keeps its last checkpoint", file=sys.stderr)
        return 128 + signal.SIGINT
    finally:
        leave()
    if outcome.written:  # rank 0's
        print(outcome.summary())
    if outcome.stopped_by is not None:
        return 128 + outcome.stopped_by  # as a shell reports a process the signal ended
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

    from .trainer.settings import add_arguments

    train = commands.add_parser(
        "train",
        help="train a causal language model (an ONNX export or a Hugging Face directory) on text: AdamW, "
        "mixed precision, checkpoints, loss curve; under torchrun, data parallel",
        description="Exit codes: 0 done, 2 a setting, model, data or --out refused (nothing written), 1 the run "
        "failed (a process lost, the loss diverged), 130/143 stopped by SIGINT/SIGTERM after a checkpoint.",
    )
    add_arguments(train)
    train.set_defaults(func=_train)

    bench = commands.add_parser(
        "bench",
        help="time the native kernels against the inlined reference, the peers and same-run rooflines",
    )
    from .bench import options as bench_options

    bench.add_argument(
        "ops",
        nargs="*",
        help="benchmarks to run (default: all); 'cliffs' times power-of-two widths against nearby ones; "
        "'training_step [CONFIG ...]' times whole training steps; 'npu_step [ROW ...]' reports where a "
        "matrix row's training step runs on the NPU, what crosses the bus and the device's memory; "
        "'fine_tuning [lora] [packing]' compares LoRA with a full fine-tune (ours and PyTorch + PEFT) and packed "
        "chat examples with padded ones",
    )
    bench.add_argument(
        "--threads",
        type=bench_options.counts,
        help="comma-separated intra-op thread counts, each at least 1 (default: 1,all)",
    )
    bench.add_argument(
        "--dtypes",
        type=bench_options.dtypes,
        help="comma-separated: float32, bfloat16, float16 (default: float32,bfloat16)",
    )
    bench.add_argument(
        "--repeats",
        type=bench_options.positive,
        default=15,
        help="most timed runs per case, at least 1 (fewer for large cases; median reported)",
    )
    bench.add_argument(
        "--quick", action="store_true", help="small shapes, 3 repeats (CI smoke test, < 1 min)"
    )
    bench.add_argument(
        "--json",
        type=bench_options.output_file,
        help="write every result, the machine and the versions to this JSON file (its folder must exist)",
    )
    bench.add_argument(
        "--markdown",
        type=bench_options.output_file,
        help="write the results tables to this Markdown file (docs/PERFORMANCE.md; its folder must exist)",
    )
    bench.add_argument(
        "--peer-venv",
        type=bench_options.venv,
        help="training_step: venv with onnxruntime-training 1.19.2 (default: $ORT_ASCEND_OPS_ORTTRAINING_VENV)",
    )
    bench.add_argument(
        "--precision",
        type=bench_options.precisions,
        help="training_step, npu_step: comma-separated precisions beside fp32 (bf16-mixed, fp16-mixed): ours native "
        "and PyTorch eager under torch.autocast at each",
    )
    bench.add_argument(
        "--nproc",
        type=bench_options.counts,
        help="training_step: comma-separated process counts, each at least 1 (1,2): data parallel under "
        "torchrun, ours (with and without ZeRO-1) against PyTorch DDP (with and without ZeroRedundancyOptimizer)",
    )
    bench.add_argument(
        "--device",
        choices=["cpu", "npu"],
        help="training_step --nproc: npu runs ours alone on NPUs (rank r on npu:LOCAL_RANK, HCCL in the "
        "graph; the emulated CANN runtime counts HCCL's calls and bytes and the bus); cpu (the default) "
        "the engines over gloo",
    )
    bench.add_argument(
        "--recompute",
        action="store_true",
        default=None,
        help="training_step: long sequences (1024, 4096, 8192 tokens; a 128k vocabulary), peak RSS and ms/step of "
        "ours under each activation recompute mode and the loss in chunks, against PyTorch eager with and "
        "without gradient checkpointing, each in a process of its own",
    )
    bench.add_argument(
        "--png",
        type=bench_options.output_file,
        help="chart the fraction of the roofline per op and case (needs matplotlib; its folder must exist)",
    )
    bench.set_defaults(func=_bench)

    commands.add_parser("docs", help="print the operator reference (docs/OPS.md)").set_defaults(func=_docs)

    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.from_command_line = argv is None
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
