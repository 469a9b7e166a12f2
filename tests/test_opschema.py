"""ONNX schema registration and shape inference driven by schemas/*.toml."""

import re
import tomllib
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from onnx.shape_inference import InferenceError

from ort_ascend_ops.op_model import make_op_model
from ort_ascend_ops.opschema import docs_markdown, infer_outputs, load_op_specs, register_schemas
from ort_ascend_ops.opschema.onnx_schema import to_onnx_schema as _to_onnx_schema
from ort_ascend_ops.opschema.specs import spec_from_toml as _spec_from_toml

F32, F16, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16
PAIRS = [(F32, F32), (F16, F16), (F16, F32), (BF16, BF16), (BF16, F32)]
DOMAIN = "ort_ascend_ops"


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_schemas()


def _infer(model: onnx.ModelProto) -> dict[str, tuple[int, list]]:
    """Strict shape inference on a copy whose graph outputs carry no type."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    names = [o.name for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    out = {}
    for o in inferred.graph.output:
        tt = o.type.tensor_type
        # ONNX names each unknown dim "unk__<k>"; map those back to None.
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tt.shape.dim]
        dims = [None if str(d).startswith("unk__") else d for d in dims]
        out[o.name] = (tt.elem_type, dims if tt.HasField("shape") else None)
    return out


def _raw_model(
    op_name: str, inputs: dict[str, tuple[int, list]], attrs: dict | None = None, outputs: list | None = None
) -> onnx.ModelProto:
    """A model make_op_model would refuse to build, for negative tests. The node produces
    ``outputs`` (default: all of the op's)."""
    outputs = outputs or [p.name for p in load_op_specs()[op_name].outputs]
    node = helper.make_node(op_name, list(inputs), outputs, domain=DOMAIN, **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()], []
    )
    graph.output.extend(onnx.ValueInfoProto(name=n) for n in outputs)
    opsets = [helper.make_opsetid("", 23), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def test_register_is_idempotent():
    register_schemas()
    register_schemas()
    schema = onnx.defs.get_schema("RmsNorm", 1, DOMAIN)
    assert [p.name for p in schema.inputs] == ["x", "gamma"]
    assert [p.name for p in schema.outputs] == ["y", "rstd"]
    assert schema.attributes["epsilon"].default_value.f == pytest.approx(1e-6)
    assert schema.has_type_and_shape_inference_function
    grad = onnx.defs.get_schema("RmsNormGrad", 1, DOMAIN)
    assert [p.name for p in grad.inputs] == ["dy", "x", "rstd", "gamma"]


RMS_NORM_SHAPES = [  # x, gamma, expected rstd
    (["B", "S", 64], [64], ["B", "S", 1]),
    ([4, 8], [4, 8], [1, 1]),
    ([2, 3, 4, 8], [4, 8], [2, 3, 1, 1]),
    ([5], [5], [1]),
    ([0, 8], [8], [0, 1]),
    ([None, 8], [8], [None, 1]),
]


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("x_shape, gamma_shape, rstd_shape", RMS_NORM_SHAPES)
def test_rms_norm_inference(pair, x_shape, gamma_shape, rstd_shape):
    t, tg = pair
    model = make_op_model("RmsNorm", {"x": (t, x_shape), "gamma": (tg, gamma_shape)})
    onnx.checker.check_model(model, full_check=True)
    assert _infer(model) == {"y": (t, x_shape), "rstd": (F32, rstd_shape)}


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize(
    "x_shape, gamma_shape, rstd_shape",
    [(["B", 1, 16], [16], ["B"]), ([4, 8], [4, 8], []), ([2, 3, 4, 8], [4, 8], [2, 3, 1, 1])],
)
def test_rms_norm_grad_inference(pair, x_shape, gamma_shape, rstd_shape):
    t, tg = pair
    model = make_op_model(
        "RmsNormGrad",
        {
            "dy": (t, x_shape),
            "x": (t, x_shape),
            "rstd": (F32, rstd_shape),
            "gamma": (tg, gamma_shape),
        },
    )
    onnx.checker.check_model(model, full_check=True)
    assert _infer(model) == {"dx": (t, x_shape), "dgamma": (F32, gamma_shape)}


def test_unknown_rank_still_gets_types():
    model = make_op_model("RmsNorm", {"x": (BF16, None), "gamma": (F32, [16])}, output_cast_float=True)
    assert _infer(model) == {"y": (F32, None), "rstd": (F32, None)}


@pytest.mark.parametrize(
    "op_name, inputs, message",
    [
        (
            "RmsNorm",
            {"x": (F16, [2, 8]), "gamma": (BF16, [8])},
            "(T, TG) = (tensor(float16), tensor(bfloat16))",
        ),
        ("RmsNorm", {"x": (F32, [2, 8]), "gamma": (F16, [8])}, "(T, TG) = (tensor(float), tensor(float16))"),
        (
            "RmsNormGrad",
            {"dy": (BF16, [2, 8]), "x": (BF16, [2, 8]), "rstd": (F32, [2]), "gamma": (F16, [8])},
            "(T, TG) = (tensor(bfloat16), tensor(float16))",
        ),
        (
            "RmsNormGrad",
            {"dy": (F16, [2, 8]), "x": (F32, [2, 8]), "rstd": (F32, [2]), "gamma": (F32, [8])},
            "already bound to tensor(float16)",
        ),
        ("RmsNorm", {"x": (TensorProto.DOUBLE, [2, 8]), "gamma": (F32, [8])}, "x has type tensor(double)"),
        (
            "RmsNormGrad",
            {"dy": (F16, [2, 8]), "x": (F16, [2, 8]), "rstd": (F16, [2]), "gamma": (F16, [8])},
            "rstd has type tensor(float16)",
        ),
        ("RmsNorm", {"x": (F32, [2, 8]), "gamma": (F32, [4])}, "does not match"),
        ("RmsNorm", {"x": (F32, [8]), "gamma": (F32, [2, 8])}, "rank(gamma) <= rank(x)"),
    ],
)
def test_inference_rejects(op_name, inputs, message):
    with pytest.raises(InferenceError, match=re.escape(message)):
        onnx.shape_inference.infer_shapes(_raw_model(op_name, inputs), strict_mode=True)
    with pytest.raises(ValueError, match=re.escape(message)):
        make_op_model(op_name, inputs)


# A made-up op exercising what the next families need from the format: optional inputs and
# outputs, int/string/float attributes, a required attribute, a shape rule reading inputs.
FUTURE_OP = """
name = "FutureOp"
domain = "test_ort_ascend_ops"
since_version = 1
doc = "Test op."
inputs = [
    { name = "x", type = "T" },
    { name = "gamma", type = "T", optional = true },
    { name = "index", type = "I" },
]
outputs = [
    { name = "y", type = "T", shape = "same:x" },
    { name = "rstd", type = "tensor(float)", shape = "rule:rms_norm_rstd", optional = true },
]
attributes = [
    { name = "mode", type = "int", default = 0 },
    { name = "layout", type = "string", required = true },
    { name = "scale", type = "float", default = 1 },
    { name = "note", type = "string" },
]
type_constraints = [
    { name = "T", types = ["tensor(float)"] },
    { name = "I", types = ["tensor(int32)", "tensor(int64)"] },
]
"""


def test_format_handles_optional_io_and_attribute_kinds():
    spec = _spec_from_toml(tomllib.loads(FUTURE_OP))
    assert spec.attributes[2].to_proto(spec.attributes[2].default).type == onnx.AttributeProto.FLOAT
    onnx.defs.register_schema(_to_onnx_schema(spec))
    try:
        schema = onnx.defs.get_schema("FutureOp", 1, "test_ort_ascend_ops")
        assert schema.inputs[1].option == onnx.defs.OpSchema.FormalParameterOption.Optional
        assert schema.attributes["layout"].required and not schema.attributes["note"].required
        assert schema.attributes["mode"].default_value.i == 0

        # Optional gamma absent: rstd's rule has nothing to go on; optional rstd not requested.
        node = helper.make_node(
            "FutureOp", ["x", "", "index"], ["y"], domain="test_ort_ascend_ops", layout="bsnd"
        )
        graph = helper.make_graph(
            [node],
            "g",
            [
                helper.make_tensor_value_info("x", F32, ["N", 4]),
                helper.make_tensor_value_info("index", TensorProto.INT64, [3]),
            ],
            [helper.make_tensor_value_info("y", F32, ["N", 4])],
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("test_ort_ascend_ops", 1)]
        )
        onnx.checker.check_model(model, full_check=True)
        assert _infer(model) == {"y": (F32, ["N", 4])}
        del model.graph.node[0].attribute[:]
        with pytest.raises(onnx.checker.ValidationError, match="layout"):
            onnx.checker.check_model(model)
    finally:
        onnx.defs.deregister_schema("FutureOp", 1, "test_ort_ascend_ops")
    with pytest.raises(ValueError, match="missing required attributes"):
        infer_outputs(spec, {"x": (F32, [2, 4]), "index": (TensorProto.INT32, [3])}, {})


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["outputs"][0].update(shape="rule:no_such_rule"), "bad shape"),
        (lambda d: d["outputs"][0].update(requires="gamma"), "only an optional output requires"),
        (lambda d: d["outputs"][1].update(requires="x"), "only an optional output requires"),
        (lambda d: d["attributes"][0].update(choices=[1, 2]), "default 0 is not one of the choices"),
        (lambda d: d.update(same_shape=[["x", "beta"]]), "same_shape names unknown inputs"),
    ],
)
def test_bad_spec_rejected(edit, message):
    data = tomllib.loads(FUTURE_OP)
    edit(data)
    with pytest.raises(ValueError, match=message):
        _spec_from_toml(data)


def test_docs_are_current():
    docs = Path(__file__).parent.parent / "docs" / "OPS.md"
    assert docs.read_text() == docs_markdown(), (
        "regenerate: python -c 'from ort_ascend_ops.opschema import docs_markdown; "
        'print(docs_markdown(), end="")\' > docs/OPS.md'
    )


ROPE_TYPES = [F32, F16, BF16]
ROPE_SHAPES = [  # data (x or dy), cos and sin
    (["B", "N", "S", 16], [1, 1, "S", 16]),
    ([2, 5, 3, 8], [2, 5, 1, 8]),
    (["S", "B", 3, 16], ["S", 1, 1, 16]),
    ([7, 3, 8], [7, 1, 8]),
    ([None, 4], [1, None]),
]


def _rope_types(t, data, table, data_names):
    return {name: (t, data) for name in data_names} | {"cos": (t, table), "sin": (t, table)}


@pytest.mark.parametrize("t", ROPE_TYPES)
@pytest.mark.parametrize("data, table", ROPE_SHAPES)
def test_rotary_position_embedding_inference(t, data, table):
    model = make_op_model("RotaryPositionEmbedding", _rope_types(t, data, table, ["x"]), {"mode": 2})
    onnx.checker.check_model(model, full_check=True)
    assert _infer(model) == {"y": (t, data)}


@pytest.mark.parametrize("t", ROPE_TYPES)
@pytest.mark.parametrize("data, table", ROPE_SHAPES)
def test_rotary_position_embedding_grad_inference(t, data, table):
    with_x = make_op_model("RotaryPositionEmbeddingGrad", _rope_types(t, data, table, ["dy", "x"]))
    without_x = make_op_model("RotaryPositionEmbeddingGrad", _rope_types(t, data, table, ["dy"]), {"mode": 3})
    for model in (with_x, without_x):
        onnx.checker.check_model(model, full_check=True)
    assert _infer(with_x) == {"dx": (t, data), "dcos": (t, table), "dsin": (t, table)}
    assert _infer(without_x) == {"dx": (t, data)}
    assert list(without_x.graph.node[0].output) == ["dx", "", ""]


def test_rotary_position_embedding_grad_schema():
    grad = onnx.defs.get_schema("RotaryPositionEmbeddingGrad", 1, DOMAIN)
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    assert [(p.name, p.option == optional) for p in grad.inputs] == [
        ("dy", False),
        ("cos", False),
        ("sin", False),
        ("x", True),
    ]
    assert [(p.name, p.option == optional) for p in grad.outputs] == [
        ("dx", False),
        ("dcos", True),
        ("dsin", True),
    ]
    assert grad.attributes["mode"].default_value.i == 0


def _rope(op_name, data, cos, sin=None, x=None, mode=0, outputs=None):
    """(op_name, inputs, attrs, node outputs) of a float32 RoPE node; data is x for the forward
    and dy for the grad, and sin defaults to cos's shape."""
    inputs = {"x" if op_name == "RotaryPositionEmbedding" else "dy": (F32, data)}
    inputs |= {"cos": (F32, cos), "sin": (F32, cos if sin is None else sin)}
    if x is not None:
        inputs["x"] = (F32, x)
    return op_name, inputs, {"mode": mode}, outputs


def _grad(*args, outputs=("dx",), **kwargs):
    return _rope("RotaryPositionEmbeddingGrad", *args, outputs=list(outputs), **kwargs)


@pytest.mark.parametrize(
    "node, message",
    [
        (_grad([2, 4], [1, 4], mode=4), "mode = 4 is not one of [0, 1, 2, 3]"),
        (_rope("RotaryPositionEmbedding", [2, 4], [1, 4], mode=-1), "mode = -1 is not one of"),
        (_grad([2, 3, 5, 7], [1, 1, 5, 7]), "mode 0 needs a last dim that is a multiple of 2, got 7"),
        (_grad([2, 3, 5, 6], [1, 1, 5, 6], mode=2), "multiple of 4, got 6"),
        (_grad([2, 3, 5, "D"], [1, 1, 5, 3], mode=1), "multiple of 2, got 3"),
        (_grad([2, 3, 5, 8], [1, 1, 5, 8], [1, 1, 4, 8]), "sin has shape [1, 1, 4, 8] but cos"),
        (_grad([2, 3, 5, 8], [1, 1, 5, 8], [1, 5, 8]), "sin has shape [1, 5, 8] but cos"),
        (_grad([2, 3, 5, 8], [3, 1, 5, 8]), "[3, 1, 5, 8] does not broadcast to dy shape"),
        (_grad([1, 3, 5, 8], [2, 1, 5, 8]), "does not broadcast"),
        (_rope("RotaryPositionEmbedding", [2, 8], [1, 4]), "[1, 4] does not broadcast to x shape"),
        (_grad([2, 3, 5, 8], [1, 1, 5, 1]), "the last axis is never broadcast"),
        (_grad([2, 3, 5, 8], [5, 8]), "cos/sin have rank 2 but dy has rank 4"),
        (_grad([], []), "dy must have rank >= 1"),
        (_grad([2, 3, 5, 8], [1, 1, 5, 8], x=[2, 3, 5, 16]), "x has shape [2, 3, 5, 16] but dy"),
        (_grad([2, 3, 5, 8], [1, 1, 5, 8], x=[3, 5, 8]), "x has shape [3, 5, 8] but dy"),
        (_grad([2, 8], [1, 8], outputs=["dx", "dcos"]), "output dcos needs input x"),
        (_grad([2, 8], [1, 8], outputs=["dx", "", "dsin"]), "output dsin needs input x"),
    ],
)
def test_rotary_position_embedding_inference_rejects(node, message):
    op_name, inputs, attrs, outputs = node
    with pytest.raises(InferenceError, match=re.escape(f"{op_name}: ")) as error:
        onnx.shape_inference.infer_shapes(_raw_model(op_name, inputs, attrs, outputs), strict_mode=True)
    assert message in str(error.value)
    with pytest.raises(ValueError, match=re.escape(message)):
        make_op_model(op_name, inputs, attrs, outputs=outputs and [name for name in outputs if name])


def test_rotary_position_embedding_grad_takes_one_type():
    inputs = {"dy": (F32, [2, 8]), "cos": (F32, [1, 8]), "sin": (BF16, [1, 8])}
    with pytest.raises(
        InferenceError, match=re.escape("sin has type tensor(bfloat16), but T is already bound")
    ):
        onnx.shape_inference.infer_shapes(
            _raw_model("RotaryPositionEmbeddingGrad", inputs, {}, ["dx"]), strict_mode=True
        )


# LightningIndexer(Grad) nodes: B=2, S1=5, S2=9, N1=3, D=8, K=4; TND with T1=7, T2=9 and B=2.
LI_SHAPES = {
    "BSND": {"query": [2, 5, 3, 8], "key": [2, 9, 1, 8], "weights": [2, 5, 3], "dy": [2, 5, 4]},
    "TND": {
        "query": [7, 3, 8],
        "key": [9, 1, 8],
        "weights": [7, 3],
        "dy": [7, 4],
        "actual_seq_lengths_query": [2],
        "actual_seq_lengths_key": [2],
    },
}
I32, I64 = TensorProto.INT32, TensorProto.INT64


def _li(op_name, base, shapes=None, types=None, absent=(), **attrs):
    """(op_name, inputs in the op's order, attrs) of a LightningIndexer(Grad) node in layout
    ``base`` (``attrs`` may override it): its shapes updated by ``shapes`` (None: unknown rank),
    sparse_indices shaped like dy unless given, less the ``absent`` inputs; float32 but for the
    integer inputs (``types`` overrides); head_num 3 for the grad."""
    shapes = LI_SHAPES[base] | (shapes or {})
    shapes.setdefault("sparse_indices", shapes["dy"])
    types = {"sparse_indices": I32, "actual_seq_lengths_query": I64, "actual_seq_lengths_key": I64} | (
        types or {}
    )
    names = [p.name for p in load_op_specs()[op_name].inputs if p.name in shapes and p.name not in absent]
    inputs = {name: (types.get(name, F32), shapes[name]) for name in names}
    grad = {"head_num": 3} if op_name == "LightningIndexerGrad" else {}
    return op_name, inputs, {"layout": base} | grad | attrs


LI_INFERENCE = [  # layout, changed shapes, expected (d_query, d_key, d_weights)
    ("BSND", {}, ([2, 5, 3, 8], [2, 9, 1, 8], [2, 5, 3])),
    (
        "BSND",
        {
            "query": ["B", "S1", 3, 8],
            "key": ["B", "S2", 1, 8],
            "weights": ["B", "S1", 3],
            "dy": ["B", "S1", "K"],
        },
        (["B", "S1", 3, 8], ["B", "S2", 1, 8], ["B", "S1", 3]),
    ),
    # Each dim is bound by whichever input gives it, and N2 is 1.
    (
        "BSND",
        {
            "query": [None, 5, 3, None],
            "key": [None, None, None, 8],
            "weights": [2, None, 3],
            "dy": [2, 5, "K"],
        },
        ([2, 5, 3, 8], [2, None, 1, 8], [2, 5, 3]),
    ),
    ("TND", {}, ([7, 3, 8], [9, 1, 8], [7, 3])),
    (
        "TND",
        {"query": ["T1", 3, 8], "key": ["T2", 1, 8], "weights": ["T1", 3], "dy": ["T1", 4]},
        (["T1", 3, 8], ["T2", 1, 8], ["T1", 3]),
    ),
]


@pytest.mark.parametrize("t", [F32, F16, BF16])
@pytest.mark.parametrize("layout, shapes, expected", LI_INFERENCE)
def test_lightning_indexer_inference(t, layout, shapes, expected):
    op_name, inputs, attrs = _li("LightningIndexer", layout, shapes, sparse_count=6)
    inputs = {name: (t if elem == F32 else elem, shape) for name, (elem, shape) in inputs.items()}
    model = make_op_model(op_name, inputs, attrs)
    onnx.checker.check_model(model, full_check=True)
    lead = expected[2][:-1]
    assert _infer(model) == {"sparse_indices": (I32, [*lead, 6]), "sparse_values": (t, [*lead, 6])}


@pytest.mark.parametrize("t, index_type", [(F32, I32), (F16, I64), (BF16, I32)])
@pytest.mark.parametrize("layout, shapes, expected", LI_INFERENCE)
def test_lightning_indexer_grad_inference(t, index_type, layout, shapes, expected):
    # The two lengths may have different integer types.
    types = {"sparse_indices": index_type, "actual_seq_lengths_query": I32}
    op_name, inputs, attrs = _li("LightningIndexerGrad", layout, shapes, types, sparse_mode=0)
    inputs = {name: (t if elem == F32 else elem, shape) for name, (elem, shape) in inputs.items()}
    model = make_op_model(op_name, inputs, attrs)
    onnx.checker.check_model(model, full_check=True)
    assert _infer(model) == {
        name: (t, shape) for name, shape in zip(["d_query", "d_key", "d_weights"], expected, strict=True)
    }


def test_lightning_indexer_grad_schema():
    grad = onnx.defs.get_schema("LightningIndexerGrad", 1, DOMAIN)
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    assert [(p.name, p.option == optional) for p in grad.inputs] == [
        ("query", False),
        ("key", False),
        ("dy", False),
        ("sparse_indices", False),
        ("weights", False),
        ("actual_seq_lengths_query", True),
        ("actual_seq_lengths_key", True),
    ]
    assert [p.name for p in grad.outputs] == ["d_query", "d_key", "d_weights"]
    assert grad.attributes["head_num"].required
    defaults = {name: a.default_value for name, a in grad.attributes.items() if name != "head_num"}
    assert defaults["layout"].s == b"BSND" and defaults["sparse_mode"].i == 3
    assert defaults["pre_tokens"].i == defaults["next_tokens"].i == 2**63 - 1
    assert defaults["deterministic"].i == 0
    forward = onnx.defs.get_schema("LightningIndexer", 1, DOMAIN)
    assert [p.name for p in forward.outputs] == ["sparse_indices", "sparse_values"]
    assert forward.attributes["sparse_count"].default_value.i == 2048


@pytest.mark.parametrize(
    "node, message",
    [
        (_li("LightningIndexerGrad", "BSND", layout="BNSD"), "layout = 'BNSD' is not one of ['BSND', 'TND']"),
        (_li("LightningIndexer", "BSND", sparse_mode=1), "sparse_mode = 1 is not one of [0, 3]"),
        (_li("LightningIndexer", "TND", sparse_count=0), "sparse_count must be >= 1, got 0"),
        (
            _li("LightningIndexerGrad", "BSND", {"query": [5, 3, 8]}),
            "layout BSND needs query shaped [B, S1, N1, D], got [5, 3, 8]",
        ),
        (
            _li("LightningIndexer", "TND", {"key": [9, 2, 8]}),
            "layout TND needs key shaped [T2, 1, D], got [9, 2, 8]",
        ),
        (_li("LightningIndexerGrad", "BSND", {"key": [2, 9, 1, 16]}), "key has D = 16 but query has D = 8"),
        (_li("LightningIndexer", "BSND", {"key": [3, 9, 1, 8]}), "key has B = 3 but query has B = 2"),
        (_li("LightningIndexerGrad", "TND", {"weights": [7, 4]}), "weights has N1 = 4 but query has N1 = 3"),
        (_li("LightningIndexerGrad", "TND", {"weights": [6, 3]}), "weights has T1 = 6 but query has T1 = 7"),
        (
            _li("LightningIndexerGrad", "BSND", {"sparse_indices": [2, 5, 5]}),
            "sparse_indices has K = 5 but dy has K = 4",
        ),
        (_li("LightningIndexerGrad", "BSND", {"dy": [2, 6, 4]}), "dy has S1 = 6 but query has S1 = 5"),
        (_li("LightningIndexerGrad", "BSND", head_num=4), "head_num = 4 but query has N1 = 3"),
        (
            _li("LightningIndexerGrad", "BSND", {"query": [2, 5, "N", 8], "weights": None}, head_num=0),
            "head_num must be >= 1, got 0",
        ),
        (
            _li("LightningIndexerGrad", "TND", absent=["actual_seq_lengths_key"]),
            "layout TND needs both actual_seq_lengths_query and actual_seq_lengths_key",
        ),
        (
            _li("LightningIndexer", "TND", {"actual_seq_lengths_key": [3]}),
            "actual_seq_lengths_key has B = 3 but actual_seq_lengths_query has B = 2",
        ),
        (
            _li("LightningIndexer", "TND", {"actual_seq_lengths_query": [2, 1]}),
            "layout TND needs actual_seq_lengths_query shaped [B], got [2, 1]",
        ),
        (
            _li("LightningIndexerGrad", "BSND", {"actual_seq_lengths_query": [2]}),
            "layout BSND takes no actual_seq_lengths_query",
        ),
        (
            _li("LightningIndexerGrad", "BSND", types={"sparse_indices": F32}),
            "sparse_indices has type tensor(float), not one of",
        ),
        (
            _li("LightningIndexer", "TND", types={"actual_seq_lengths_key": TensorProto.UINT64}),
            "actual_seq_lengths_key has type tensor(uint64)",
        ),
        (
            _li("LightningIndexerGrad", "BSND", types={"dy": F16}),
            "dy has type tensor(float16), but T is already",
        ),
    ],
)
def test_lightning_indexer_inference_rejects(node, message):
    op_name, inputs, attrs = node
    with pytest.raises(InferenceError, match=re.escape(f"{op_name}: ")) as error:
        onnx.shape_inference.infer_shapes(_raw_model(op_name, inputs, attrs), strict_mode=True)
    assert message in str(error.value)
    with pytest.raises(ValueError, match=re.escape(message)):
        make_op_model(op_name, inputs, attrs)


def test_a_familys_ops_allow_the_same_choices():
    # The reference functions' shared rules (reference/<family>_rules.py) take the forward op's.
    specs = load_op_specs()
    forwards = [name for name in specs if not name.endswith("Grad")]
    for name, spec in specs.items():
        # The forward op its name extends (GroupedMatmulWeightGrad's is GroupedMatmul), or itself.
        family = max((f for f in forwards if name.startswith(f)), key=len, default=name)
        forward = {a.name: a.choices for a in specs[family].attributes}
        for a in spec.attributes:
            if a.choices or forward.get(a.name):
                assert a.choices == forward[a.name], f"{name}.{a.name}"
