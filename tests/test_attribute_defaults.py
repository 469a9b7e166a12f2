"""Leaving out an attribute gives bit-identical results to passing its default (the one the specs
declare), on every engine."""

import pytest

from cases import small
from engines import run
from harness import bits
from oracles import F16, F32
from ort_ascend_ops.opschema import load_op_specs

DEFAULTED = {
    op: [(a.name, a.default) for a in spec.attributes if a.default is not None]
    for op, spec in load_op_specs().items()
}
# onnx.reference's GatherElements takes at most 64 values along its axis (np.choose): 2048
# selection slots run on the other engines alone.
BEYOND_ONNX_REFERENCE = {("LightningIndexer", "sparse_count")}


@pytest.mark.parametrize("op", [op for op, defaults in DEFAULTED.items() if defaults])
@pytest.mark.parametrize("engine", ["native", "eager", "ort", "reference", "aclnn"])
def test_an_omitted_attribute_is_its_default(engine, op, request):
    if engine == "aclnn":
        request.getfixturevalue("emulator")
    # aclnnLightningIndexer(Grad) takes no float32.
    inputs, attrs = small(op, F16 if engine == "aclnn" else F32)
    for name, default in DEFAULTED[op]:
        if engine in ("eager", "reference") and (op, name) in BEYOND_ONNX_REFERENCE:
            continue
        rest = {key: value for key, value in attrs.items() if key != name}
        omitted = run(engine, op, inputs, rest)
        given = run(engine, op, inputs, rest | {name: default})
        assert [bits(a) for a in omitted] == [bits(a) for a in given], name
