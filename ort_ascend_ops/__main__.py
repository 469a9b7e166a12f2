"""Command line: ``python -m ort_ascend_ops {demo,bench,docs}``."""

from __future__ import annotations

import argparse
import json
import sys


def _bench(args: argparse.Namespace) -> int:
    from .bench import ALIASES, BENCHES
    from .bench.runner import HEADER

    names = [ALIASES.get(name, name) for name in args.ops] or list(BENCHES)
    unknown = sorted(set(names) - set(BENCHES))
    if unknown:
        print(
            f"unknown benchmarks {unknown}; choose from {sorted(BENCHES) + sorted(ALIASES)}", file=sys.stderr
        )
        return 2
    threads = [int(t) for t in args.threads.split(",")]
    repeats = 5 if args.quick else args.repeats
    print(HEADER, flush=True)
    results = []
    for name in names:
        module = BENCHES[name]
        for case in module.cases(args.quick):
            for n in threads:
                result = module.run(case, n, repeats)
                print(result.row(), flush=True)
                results.append(result.as_dict())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import main

    return main(steps=args.steps, seed=args.seed, threads=args.threads or None)


def _docs(args: argparse.Namespace) -> int:
    from .opschema import docs_markdown

    sys.stdout.write(docs_markdown())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ort_ascend_ops", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="train the example models a few SGD steps natively; time the ops; check the gradients"
    )
    demo.add_argument("--steps", type=int, default=20, help="SGD steps per model")
    demo.add_argument("--seed", type=int, default=0, help="seed of the inputs and initial weights")
    demo.add_argument(
        "--threads", type=int, default=1, help="intra-op thread count (0: ONNX Runtime's default)"
    )
    demo.set_defaults(func=_demo)

    bench = commands.add_parser("bench", help="time the native kernels against same-run baselines")
    bench.add_argument("ops", nargs="*", help="benchmarks to run (default: all)")
    bench.add_argument("--threads", default="1,2", help="comma-separated intra-op thread counts")
    bench.add_argument("--repeats", type=int, default=15, help="timed runs per case (median reported)")
    bench.add_argument("--quick", action="store_true", help="small shapes, few repeats (smoke test)")
    bench.add_argument("--json", help="also write the results to this JSON file")
    bench.set_defaults(func=_bench)

    commands.add_parser("docs", help="print the operator reference (docs/OPS.md)").set_defaults(func=_docs)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
