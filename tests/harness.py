"""Models and buffers the tests build by hand: a node without the schema's checks, tensors placed
at chosen offsets in a page, and raw bytes for bit-for-bit comparisons, the plain loops' against
the AVX2 paths' included."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from onnx import helper

from ort_ascend_ops import attach_functions, make_op_model, make_session
from ort_ascend_ops.runtime import ortvalue_view


def raw_model(op_name, inputs, outputs, attrs=None, with_functions=True):
    """A single-node model built without the schema's checks, for inputs the schema would refuse:
    ``inputs`` maps names to arrays (their dtypes become the graph's types, shapes are dynamic),
    ``outputs`` maps names to NumPy dtypes; with the reference functions unless told not. An input
    given as None is an empty slot (an absent optional input before a present one)."""

    def info(name, dtype, rank):
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        return helper.make_tensor_value_info(name, elem, None if rank is None else [None] * rank)

    slots = [name if a is not None else "" for name, a in inputs.items()]
    node = helper.make_node(op_name, slots, list(outputs), domain="ort_ascend_ops", **(attrs or {}))
    graph = helper.make_graph(
        [node],
        op_name,
        [info(name, a.dtype, a.ndim) for name, a in inputs.items() if a is not None],
        [info(name, dtype, None) for name, dtype in outputs.items()],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("ort_ascend_ops", 1)],
        ir_version=10,
    )
    return attach_functions(model) if with_functions else model


def fed(inputs):
    """The feeds of a raw model's inputs: None marks an empty slot, which takes none."""
    return {name: a for name, a in inputs.items() if a is not None}


def bits(a):
    """The array's raw bytes, for bit-for-bit comparisons of any dtype."""
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def placed(array, offset):
    """A copy of ``array`` that starts ``offset`` bytes into a 4 KiB page."""
    buffer = np.empty(array.nbytes + 8192, np.uint8)
    start = (offset - buffer.ctypes.data) % 4096
    copy = buffer[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def run_placed(op_name, inputs, attrs, outputs, input_offset, output_offset):
    """Outputs of ``op_name`` with every input starting ``input_offset`` bytes into a page and
    every output (``outputs``: name -> (dtype, shape)) ``output_offset`` bytes in."""
    types = {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}
    session = make_session(make_op_model(op_name, types, attrs)).ort
    binding = session.io_binding()
    feeds = {name: placed(a, input_offset) for name, a in inputs.items()}
    results = {
        name: placed(np.zeros(shape, dtype), output_offset) for name, (dtype, shape) in outputs.items()
    }
    for name, array in feeds.items():
        binding.bind_ortvalue_input(name, ortvalue_view(array))
    for name, array in results.items():
        binding.bind_ortvalue_output(name, ortvalue_view(array))
    session.run_with_iobinding(binding)
    return list(results.values())


_CAPPED_CHILD = """
import importlib, sys
import numpy as np
outputs = getattr(importlib.import_module(sys.argv[1]), sys.argv[2])(np.random.default_rng(int(sys.argv[3])))
np.savez(sys.argv[4], *[np.asarray(o).view(np.uint8) for o in outputs])
"""


def _run_capped(outputs, isa, seed, path):
    child = [sys.executable, "-c", _CAPPED_CHILD, outputs.__module__, outputs.__name__, str(seed), str(path)]
    env = dict(os.environ, ORT_ASCEND_OPS_ISA=isa)
    subprocess.run(child, env=env, cwd=Path(__file__).parent, check=True)
    return np.load(path)


def assert_plain_loops_give_avx2_bits(outputs, tmp_path, best=True, plain=True):
    """``outputs(rng)``, a module-level function of a test module returning a list of arrays, run
    through the plain loops and the AVX2 paths from one fresh seed: the same bits. Each runs in a
    child whose ORT_ASCEND_OPS_ISA caps the paths (baseline, avx2); with `best`, this process's
    paths (AVX-512 where the CPU has it) give the AVX2 bits too. Ops whose AVX-512 BF16 products are
    summed in another order (gemm_bf16) leave `best` out and meet the oracles instead; ops whose
    plain loops sum in another order than their vector paths leave `plain` out."""
    seed = int(np.random.default_rng().integers(1 << 30))
    avx2 = _run_capped(outputs, "avx2", seed, tmp_path / "avx2.npz")
    if plain:
        baseline = _run_capped(outputs, "baseline", seed, tmp_path / "baseline.npz")
        assert avx2.files == baseline.files
        for name in avx2.files:
            np.testing.assert_array_equal(baseline[name], avx2[name])
    if best:
        ours = outputs(np.random.default_rng(seed))
        assert len(ours) == len(avx2.files)
        for i, out in enumerate(ours):
            np.testing.assert_array_equal(avx2[f"arr_{i}"], np.asarray(out).view(np.uint8))


def assert_capped_isa_matches_oracle(family, isa):
    """isa_check.py's checks of `family` against the oracles, in a child whose ORT_ASCEND_OPS_ISA is
    `isa`."""
    script = Path(__file__).with_name("isa_check.py")
    env = dict(os.environ, ORT_ASCEND_OPS_ISA=isa)
    result = subprocess.run([sys.executable, str(script), family], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
