"""Conv, MaxPool, AveragePool, GlobalAveragePool and BatchNormalization against PyTorch autograd:
single Convs (1-d to 3-d, strides, dilations, pads, auto_pad, groups, depthwise) and pools
(ties, ceil_mode, count_include_pad both ways), in float32 and float16; a small convolutional
classifier exported by export_torch in train() (BatchNorm normalizing by the batch's statistics),
and by onnxruntime-training's own path (torch.onnx.export in training mode, then
generate_artifacts), whose eval model normalizes by the running statistics; Mamba's causal
depthwise convolution at two sequence lengths of one export; and the refusals, which name the
node."""

import copy
import io

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ort_ascend_ops import make_session
from ort_ascend_ops.training import GradientError, build_training_model, export_torch

torch = pytest.importorskip("torch")
F = torch.nn.functional

from ort_ascend_ops.training.artifacts import LossType, generate_artifacts  # noqa: E402

FLOAT = TensorProto.FLOAT
TOLERANCE = 1e-5


def close(ours, theirs, tolerance=TOLERANCE):
    """Within ``tolerance`` of torch's norm; the floor: a gradient that is 0 in exact arithmetic
    comes out as rounding in both."""
    theirs = np.asarray(theirs, np.float64)
    assert ours.shape == theirs.shape
    assert np.linalg.norm(ours - theirs) <= tolerance * max(np.linalg.norm(theirs), 1e-3)


def single_op(op, arrays, attrs, output_shape):
    """loss = sum(op(*arrays) * r), float32, at the newest opset ONNX Runtime runs."""
    nodes = [
        helper.make_node(op, list(arrays), ["y"], name="y", **attrs),
        helper.make_node("Mul", ["y", "r"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["loss"], keepdims=0),
    ]
    inputs = [helper.make_tensor_value_info(n, FLOAT, a.shape) for n, a in arrays.items()]
    inputs.append(helper.make_tensor_value_info("r", FLOAT, output_shape))
    graph = helper.make_graph(nodes, op, inputs, [helper.make_tensor_value_info("loss", FLOAT, [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def check_against_torch(op, arrays, attrs, torch_op, rng):
    tensors = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in arrays.items()}
    y = torch_op(*tensors.values())
    r = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    loss = (y * torch.tensor(r, dtype=torch.float64)).sum()
    loss.backward()
    training = build_training_model(single_op(op, arrays, attrs, list(y.shape)), "loss", list(arrays))
    results = make_session(training).run(arrays | {"r": r})
    close(results[0], loss.item())
    for grad, tensor in zip(results[1:], tensors.values(), strict=True):
        close(grad, tensor.grad)


def padded(x, pads):
    """x padded with zeros by ONNX's pads (begins, then ends) over its spatial axes."""
    spatial = len(pads) // 2
    return F.pad(x, [p for axis in reversed(range(spatial)) for p in (pads[axis], pads[axis + spatial])])


# (id, x's shape, w's shape, bias, attrs, the explicit pads torch applies)
CONVS = [
    ("1d", (2, 3, 7), (4, 3, 3), True, {}, [0, 0]),
    ("1d-strided-dilated-uneven-pads", (2, 3, 9), (4, 3, 3), True, {"strides": [2], "pads": [1, 2], "dilations": [2]}, [1, 2]),
    ("1d-causal-depthwise", (2, 4, 10), (4, 1, 4), True, {"group": 4, "pads": [3, 3]}, [3, 3]),
    ("2d-grouped", (2, 4, 8, 9), (6, 2, 3, 2), False, {"group": 2, "strides": [2, 3], "pads": [1, 0, 2, 1], "dilations": [1, 2]}, [1, 0, 2, 1]),
    ("2d-depthwise-multiplier", (2, 4, 8, 9), (8, 1, 3, 3), True, {"group": 4, "strides": [3, 2], "pads": [1, 1, 1, 1], "dilations": [2, 1]}, [1, 1, 1, 1]),
    ("2d-same-upper", (2, 3, 7, 6), (5, 3, 4, 2), True, {"auto_pad": "SAME_UPPER"}, [1, 0, 2, 1]),
    ("2d-same-lower-strided", (2, 3, 7, 6), (5, 3, 3, 3), True, {"auto_pad": "SAME_LOWER", "strides": [2, 2]}, [1, 1, 1, 1]),
    ("2d-valid", (1, 2, 5, 5), (3, 2, 2, 2), True, {"auto_pad": "VALID", "strides": [2, 2]}, [0, 0, 0, 0]),
    ("3d-remainder-past-the-kernel", (1, 2, 5, 6, 7), (3, 2, 2, 3, 2), True, {"strides": [2, 2, 3], "pads": [0, 1, 1, 1, 0, 1]}, [0, 1, 1, 1, 0, 1]),
    ("3d-grouped-dilated", (2, 6, 11, 5, 4), (6, 2, 3, 1, 2), True, {"group": 3, "strides": [3, 2, 1], "dilations": [3, 1, 1]}, [0] * 6),
]  # fmt: skip


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "bias", "attrs", "pads"), [c[1:] for c in CONVS], ids=[c[0] for c in CONVS]
)
def test_conv_matches_torch(x_shape, w_shape, bias, attrs, pads, rng):
    arrays = {"x": rng.standard_normal(x_shape), "w": rng.standard_normal(w_shape)}
    if bias:
        arrays["b"] = rng.standard_normal(w_shape[0])
    arrays = {n: a.astype(np.float32) for n, a in arrays.items()}
    convolve = (F.conv1d, F.conv2d, F.conv3d)[len(x_shape) - 3]

    def reference(x, w, b=None):
        strides, dilations = (attrs.get(a, 1) for a in ("strides", "dilations"))
        return convolve(
            padded(x, pads), w, b, stride=strides, dilation=dilations, groups=attrs.get("group", 1)
        )

    check_against_torch("Conv", arrays, attrs, reference, rng)


def rounded(shape):
    """Values with many ties (integers), which a pool must route as torch does: to the first."""
    return lambda rng: np.round(rng.standard_normal(shape))


def normal(shape):
    return lambda rng: rng.standard_normal(shape)


# (id, op, x, attrs, torch's pool)
POOLS = [
    ("max-2d-padded-ties", "MaxPool", rounded((2, 3, 7, 8)), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, lambda x: F.max_pool2d(x, 3, 2, 1)),
    ("max-2d-ceil-ties", "MaxPool", rounded((2, 3, 7, 8)), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True)),
    ("max-1d-overlapping-dilated-ties", "MaxPool", rounded((2, 3, 9)), {"kernel_shape": [3], "pads": [1, 1], "dilations": [2]}, lambda x: F.max_pool1d(x, 3, 1, 1, dilation=2)),
    ("max-3d", "MaxPool", normal((1, 2, 4, 5, 6)), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}, lambda x: F.max_pool3d(x, 2)),
    ("average-3d", "AveragePool", normal((1, 2, 5, 6, 7)), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}, lambda x: F.avg_pool3d(x, 2)),
    ("global-average", "GlobalAveragePool", normal((2, 3, 5, 6)), {}, lambda x: F.adaptive_avg_pool2d(x, 1)),
    ("global-average-1d", "GlobalAveragePool", normal((2, 3, 7)), {}, lambda x: x.mean(-1, keepdim=True)),
]  # fmt: skip
for include in (0, 1):
    for ceil in (0, 1):
        flags = {"count_include_pad": include, "ceil_mode": ceil}
        torch_flags = {"count_include_pad": bool(include), "ceil_mode": bool(ceil)}
        name = f"average-{'include' if include else 'exclude'}-pad{'-ceil' if ceil else ''}"
        POOLS += [
            # The last window of the 1-d case starts in the end padding when ceil_mode is on: dropped.
            (f"{name}-1d", "AveragePool", normal((2, 3, 10)), {"kernel_shape": [4], "strides": [3], "pads": [2, 2], **flags},
             lambda x, f=torch_flags: F.avg_pool1d(x, 4, 3, 2, **f)),
            (f"{name}-2d", "AveragePool", normal((2, 3, 7, 8)), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], **flags},
             lambda x, f=torch_flags: F.avg_pool2d(x, 3, 2, 1, **f)),
        ]  # fmt: skip


@pytest.mark.parametrize(("op", "make", "attrs", "pool"), [c[1:] for c in POOLS], ids=[c[0] for c in POOLS])
def test_pool_matches_torch(op, make, attrs, pool, rng):
    check_against_torch(op, {"x": make(rng).astype(np.float32)}, attrs, pool, rng)


HALF_CASES = [
    ("Conv", {"group": 2, "strides": [2], "pads": [1, 2]}, lambda x, w: F.conv1d(padded(x, [1, 2]), w, stride=2, groups=2)),
    ("MaxPool", {"kernel_shape": [3], "strides": [2]}, lambda x: F.max_pool1d(x, 3, 2)),
    ("AveragePool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False)),
    ("GlobalAveragePool", {}, lambda x: x.mean(-1, keepdim=True)),
]  # fmt: skip


@pytest.mark.parametrize(("op", "attrs", "reference"), HALF_CASES, ids=[c[0] for c in HALF_CASES])
def test_float16_gradients(op, attrs, reference, rng):
    """float16 inputs (the rules sum in float32): float16 gradients within a few of float16's
    roundings (2**-11) of torch's float64 on the same values."""
    arrays = {"x": rng.standard_normal((4, 4, 64)).astype(np.float16)}
    if op == "Conv":
        arrays["w"] = rng.standard_normal((6, 2, 3)).astype(np.float16)
    tensors = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in arrays.items()}
    y = reference(*tensors.values())
    r = rng.standard_normal(tuple(y.shape)).astype(np.float16)
    (y * torch.tensor(r, dtype=torch.float64)).sum().backward()
    nodes = [
        helper.make_node(op, list(arrays), ["y"], **attrs),
        helper.make_node("Mul", ["y", "r"], ["t"]),
        helper.make_node("Cast", ["t"], ["t32"], to=FLOAT),
        helper.make_node("ReduceSum", ["t32"], ["loss"], keepdims=0),
    ]
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT16, a.shape) for n, a in [*arrays.items(), ("r", r)]
    ]
    graph = helper.make_graph(nodes, op, inputs, [helper.make_tensor_value_info("loss", FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    results = make_session(build_training_model(model, "loss", list(arrays))).run(arrays | {"r": r})
    for grad, tensor in zip(results[1:], tensors.values(), strict=True):
        assert grad.dtype == np.float16
        close(grad.astype(np.float64), tensor.grad, 2e-3)


class Classifier(torch.nn.Module):
    """A small CNN: a convolution and a batch norm, max pooling, a grouped strided dilated
    convolution with a bias, a depthwise one and a batch norm, average pooling (ceil_mode), global
    average pooling, a linear head; ``forward(x, labels)`` its cross-entropy loss, or its logits
    without labels."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.norm = torch.nn.BatchNorm2d(8)
        self.grouped = torch.nn.Conv2d(8, 12, 3, stride=2, padding=2, dilation=2, groups=4)
        self.depthwise = torch.nn.Conv2d(12, 12, 3, padding=1, groups=12, bias=False)
        self.depthwise_norm = torch.nn.BatchNorm2d(12)
        self.head = torch.nn.Linear(12, 5)

    def forward(self, x, labels=None):
        h = F.max_pool2d(F.relu(self.norm(self.conv(x))), 3, 2, padding=1)
        h = F.relu(self.grouped(h))
        h = F.relu(self.depthwise_norm(self.depthwise(h)))
        h = F.adaptive_avg_pool2d(F.avg_pool2d(h, 2, ceil_mode=True), 1)
        logits = self.head(h.flatten(1))
        return logits if labels is None else F.cross_entropy(logits, labels)


def classifier():
    """The classifier, its weights and running statistics moved off their initial values."""
    torch.manual_seed(0)
    model = Classifier()
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point():
                tensor.add_(0.1 * torch.randn_like(tensor))
    return model


def batch(seed, size=4):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(size, 3, 13, 11, generator=generator), torch.randint(
        0, 5, (size,), generator=generator
    )


def torch_gradients(model, x, labels):
    """torch's loss and parameter gradients, in float64, the module in its mode."""
    double = copy.deepcopy(model).double()
    loss = double(x.double(), labels)
    loss.backward()
    return loss.item(), {n: p.grad.numpy() for n, p in double.named_parameters()}


def test_classifier_trains_with_torchs_gradients():
    model = classifier().train()
    export = export_torch(model, batch(0))
    modes = [
        a.i
        for n in export.graph.node
        if n.op_type == "BatchNormalization"
        for a in n.attribute
        if a.name == "training_mode"
    ]
    assert modes == [1, 1]  # as torch runs a module in train()
    training = build_training_model(export, "loss", [n for n, _ in model.named_parameters()])
    session = make_session(training)
    for seed in (1, 2):  # fresh batches, not the exported one
        x, labels = batch(seed)
        names = [o.name for o in training.graph.output]
        results = dict(zip(names, session.run({"x": x.numpy(), "labels": labels.numpy()}), strict=True))
        loss, grads = torch_gradients(model, x, labels)
        close(results["loss"], loss)
        for name, grad in grads.items():
            close(results[f"{name}_grad"], grad)


def test_onnxruntime_training_users_classifier(tmp_path):
    """Their path: the logits exported by torch.onnx.export in training mode (TorchScript:
    GlobalAveragePool, BatchNormalization with training_mode 1), generate_artifacts adding the
    cross-entropy; the training model against torch in train(), the eval model in eval()."""
    model = classifier().train()
    exported = io.BytesIO()
    torch.onnx.export(model, (batch(0)[0],), exported, dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["x"], output_names=["logits"], opset_version=18)  # fmt: skip
    forward = onnx.load_from_string(exported.getvalue())
    assert {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization"} <= {
        n.op_type for n in forward.graph.node
    }
    requires_grad = [n for n, _ in model.named_parameters()]
    paths = generate_artifacts(
        forward, requires_grad, loss=LossType.CrossEntropyLoss, artifact_directory=tmp_path
    )
    weights = {n: t.detach().numpy() for n, t in model.state_dict().items() if n in requires_grad}
    x, labels = batch(1)
    feeds = {"x": x.numpy(), "labels": labels.numpy()} | weights

    def run(path):
        session = ort.InferenceSession(str(path))
        return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))

    results = run(paths["training"])
    loss, grads = torch_gradients(model, x, labels)
    close(results["loss"], loss)
    for name, grad in grads.items():
        close(results[f"{name}_grad"], grad)
    evaluated = torch_gradients(model.eval(), x, labels)[0]
    assert abs(evaluated - loss) > 1e-2  # the running statistics are not the batch's
    close(run(paths["eval"])["loss"], evaluated)


class CausalConv(torch.nn.Module):
    """Mamba's mixer opening: a projection, a depthwise Conv1d padded by kernel - 1 on both
    sides and cut to the sequence's length (causal), SiLU; loss = sum(out * r)."""

    def __init__(self, channels=6, kernel=4):
        super().__init__()
        self.project = torch.nn.Linear(channels, channels)
        self.conv = torch.nn.Conv1d(channels, channels, kernel, groups=channels, padding=kernel - 1)

    def forward(self, x, r):
        h = self.project(x).transpose(1, 2)
        return (F.silu(self.conv(h)[..., : x.shape[1]]) * r).sum()


def test_causal_depthwise_conv_as_mamba_exports_it():
    torch.manual_seed(0)
    model = CausalConv()
    sequence = torch.export.Dim("sequence", min=2)
    example = (torch.randn(2, 7, 6), torch.randn(2, 6, 7))
    export = export_torch(model, example, dynamic_shapes={"x": {1: sequence}, "r": {2: sequence}})
    training = build_training_model(export, "loss", [n for n, _ in model.named_parameters()])
    session = make_session(training)
    names = [o.name for o in training.graph.output]
    for length in (5, 9):  # the sequence is dynamic: no shape at build time
        x, r = torch.randn(2, length, 6), torch.randn(2, 6, length)
        results = dict(zip(names, session.run({"x": x.numpy(), "r": r.numpy()}), strict=True))
        double = copy.deepcopy(model).double()
        loss = double(x.double(), r.double())
        loss.backward()
        close(results["loss"], loss.item())
        for name, parameter in double.named_parameters():
            close(results[f"{name}_grad"], parameter.grad.numpy())


def symbolic_model(op, attrs, x_shape, w_shape=None):
    """loss = ReduceSum(op(x[, w])) with x's shape ``x_shape`` (names for dims unknown until run time)."""
    inputs = [helper.make_tensor_value_info("x", FLOAT, x_shape)]
    if w_shape is not None:
        inputs.append(helper.make_tensor_value_info("w", FLOAT, w_shape))
    nodes = [
        helper.make_node(op, [i.name for i in inputs], ["y"], name="pool_or_conv", **attrs),
        helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(nodes, op, inputs, [helper.make_tensor_value_info("loss", FLOAT, [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


# (id, model, the error after the node's name)
REFUSED = [
    ("conv-strided-dynamic", symbolic_model("Conv", {"strides": [2]}, [2, 3, "length"], [4, 3, 3]), "strides \\[2\\] needs"),
    ("conv-same-dynamic", symbolic_model("Conv", {"auto_pad": "SAME_UPPER"}, [2, 3, "length"], [4, 3, 3]), "auto_pad SAME_UPPER needs"),
    ("max-pool-column-major", symbolic_model("MaxPool", {"kernel_shape": [2, 2], "storage_order": 1}, [1, 2, 4, 4]), "storage_order 1"),
    ("average-pool-dynamic", symbolic_model("AveragePool", {"kernel_shape": [2]}, [2, 3, "length"]), "spatial sizes"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refusals_name_the_node(model, message):
    op = model.graph.node[0].op_type
    with pytest.raises(GradientError, match=f"{op} node 'pool_or_conv'.*{message}"):
        build_training_model(model, "loss", [i.name for i in model.graph.input])
