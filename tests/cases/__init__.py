"""Every op's test cases in one table per op, the module ``tests/cases/<op>.py`` (``<op>`` its
schema's file name), for the tests that run over every op: hostile values, attribute defaults, the
portable path, resources, concurrency, faults, scratch memory, the fuzz corpus and the aclnn
probe. A new op adds its module here and is covered by all of them with no edit. A family's shared
inputs and strategies live in its forward op's module; each op's oracle tests keep their own table
in ``tests/test_<op>.py``."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import numpy as np
from hypothesis.strategies import SearchStrategy

from oracles import F32
from ort_ascend_ops.opschema import load_op_specs

Call = tuple[dict, dict]  # (inputs, attributes)
BIG = 2**40  # two of these overflow int64
HUGE = 2**62


@dataclass(frozen=True)
class Fault:
    """A call whose parallel tasks each allocate more than ``HEADROOM`` (tests/fault_check.py):
    ``failing`` and ``attrs`` make it, ``output_bytes`` is what ORT allocates for its outputs, and
    ``valid`` is a small call ``check(outputs)`` holds to the float64 oracle."""

    attrs: dict
    failing: dict
    output_bytes: int
    valid: dict
    check: Callable[[list], None]


@dataclass(frozen=True)
class Scratch:
    """A call whose scratch once grew beyond its tensors (tests/scratch_check.py): ``check``
    holds its outputs to the float64 oracle."""

    attrs: dict
    inputs: dict
    check: Callable[[list], None]


@dataclass(frozen=True)
class OpCases:
    """One op's cases, each from the name in capitals or the function of its module:

    - ``small(t)``: a small valid call with float inputs of type t, valid on every engine (the
      aclnn backend's default product too) and with every defaulted attribute valid at its default.
    - ``variants(rng)``: a valid call of each kind the op has (optional inputs, layouts, modes),
      run on the portable path at every opset against the native kernel.
    - ``refused(rng)`` (optional): named calls the contract refuses, one rule broken each: (inputs,
      attrs, outputs as ``raw_model`` takes them, a word the error must carry besides the op), run
      on the native and the portable path.
    - ``resources()``: (valid inputs, failing inputs, attributes) of one dynamic-shape model,
      run 10,000 times each with memory flat.
    - ``concurrency()``: a call large enough to split over intra-op threads, run on many threads.
    - ``EMPTY_BUT_VAST``: (input shapes, attributes, output shapes or None for an error) of
      tensors that are empty but claim astronomical extents.
    - ``VALID``, ``INVALID``: the fuzz strategies (built from tests/fuzzing.py).
    - ``fault(rng)`` (optional): for a kernel that allocates inside its tasks, a ``Fault``.
    - ``SCRATCH`` (optional): named calls (rng -> ``Scratch``) whose scratch once grew past their
      tensors.
    """

    small: Callable[[np.dtype], Call]
    variants: Callable[[np.random.Generator], list[Call]]
    refused: Callable[[np.random.Generator], dict[str, tuple]]
    resources: Callable[[], tuple[dict, dict, dict]]
    concurrency: Callable[[], Call]
    empty_but_vast: list[tuple[dict, dict, list | None]]
    valid: SearchStrategy
    invalid: SearchStrategy
    fault: Callable[[np.random.Generator], Fault] | None
    scratch: dict[str, Callable[[np.random.Generator], Scratch]]

    @classmethod
    def of(cls, module) -> OpCases:
        return cls(
            small=module.small,
            variants=module.variants,
            refused=getattr(module, "refused", lambda rng: {}),
            resources=module.resources,
            concurrency=module.concurrency,
            empty_but_vast=module.EMPTY_BUT_VAST,
            valid=module.VALID,
            invalid=module.INVALID,
            fault=getattr(module, "fault", None),
            scratch=getattr(module, "SCRATCH", {}),
        )


def small(op, t=F32):
    """(inputs, attrs) of a small valid call of op with inputs of float type t."""
    return CASES[op].small(t)


def raw_outputs(op, t=F32):
    """op's outputs as ``raw_model`` takes them (name -> NumPy type): t for every output typed by a
    type parameter, the fixed type otherwise (LightningIndexer's int32 indices)."""
    fixed = {"tensor(int32)": np.int32, "tensor(float)": F32}
    return {p.name: fixed.get(p.type, t) for p in load_op_specs()[op].outputs}


def _load():
    """Each schema's op name -> the cases of the module named as its file."""
    schemas = Path(__file__).resolve().parents[2] / "schemas"
    table = {}
    for path in sorted(schemas.glob("*.toml")):
        name = tomllib.loads(path.read_text())["name"]
        table[name] = OpCases.of(import_module(f"cases.{path.stem}"))
    return table


# Last: the op modules import this module's names.
CASES: dict[str, OpCases] = _load()
