"""MatMul, Softmax, LogSoftmax and the losses built on them on the NPU
(native/aclnn/standard/matmul.cc, softmax.cc) against NumPy's float64 formulas of ONNX's
definitions: numpy's promotion of 1-D operands and batch broadcasting, axes past the vendor's
limits, ignored targets and weighted means, and refusals naming the op and the rule."""

import ctypes

import numpy as np
import pytest
from aclnn_checks import FirstPhases
from aclnn_standard import BF16, I32, I64, Case, check, floats, params, refused, run, wide

from ort_ascend_ops import aclnn_emulator

# ---------------------------------------------------------------------------------------------
# MatMul


def matmul_case(a_shape, b_shape, id, aclnn=("aclnnMatmul",)):
    return Case(
        "MatMul",
        lambda rng, t: [floats(rng, a_shape, t), floats(rng, b_shape, t)],
        lambda a, b: np.asarray(np.matmul(*wide(a, b))),
        list(aclnn),
        id=id,
    )


MATMUL = [
    matmul_case([3, 4], [4, 5], "2d-2d"),
    matmul_case([4], [4, 5], "1d-2d"),
    matmul_case([3, 4], [4], "2d-1d"),
    matmul_case([7], [7], "1d-1d"),
    matmul_case([2, 3, 4], [4, 5], "3d-2d"),
    matmul_case([4], [2, 4, 5], "1d-3d"),
    matmul_case([3, 4], [2, 2, 4, 5], "2d-4d"),
    matmul_case([2, 1, 3, 4], [5, 4, 6], "batch-broadcast"),
    matmul_case([6, 256], [256, 3], "long-k"),
    # Seven axes: the batch axes merge ([2, 3] whole, [5] broadcast by A, [1] dropped) into three.
    matmul_case([2, 3, 1, 1, 2, 3, 4], [2, 3, 5, 1, 2, 4, 2], "rank-7"),
    matmul_case([3, 0], [0, 4], "k-0"),
    matmul_case([0, 4], [4, 5], "m-0", aclnn=()),
]


@pytest.mark.parametrize("case, dtype", params(MATMUL))
def test_matmul_gives_numpys_product_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)


def test_matmul_refuses_k_that_differ_naming_both_aclnn(rng, emulator):
    case = MATMUL[0]
    refused(
        case, [floats(rng, [3, 4], np.float32), floats(rng, [5, 6], np.float32)], r"A \[3,4\] has K = 4 but B"
    )


def test_matmul_refuses_batches_that_do_not_broadcast_aclnn(rng, emulator):
    case = MATMUL[0]
    a, b = floats(rng, [2, 3, 4], np.float32), floats(rng, [3, 4, 5], np.float32)
    refused(case, [a, b], r"batch axes of A \[2,3,4\] and B \[3,4,5\] do not broadcast")


def test_matmul_refuses_batches_past_the_vendors_axes_aclnn(rng, emulator):
    # Six batch axes that alternate between A's and B's broadcasting merge into no fewer.
    case = MATMUL[0]
    a, b = (
        floats(rng, [2, 1, 2, 1, 2, 1, 3, 4], np.float32),
        floats(rng, [1, 2, 1, 2, 1, 2, 4, 3], np.float32),
    )
    refused(case, [a, b], r"do not merge into the 4 aclnnMatmul takes")


# ---------------------------------------------------------------------------------------------
# Gemm


def gemm_case(a_shape, b_shape, c_shape, id, aclnn, **attrs):
    """alpha * A' @ B' + beta * C, A' and B' transposed as transA and transB say; C absent when
    ``c_shape`` is None."""

    def make(rng, t):
        inputs = [floats(rng, a_shape, t), floats(rng, b_shape, t)]
        return inputs if c_shape is None else [*inputs, floats(rng, c_shape, t)]

    def oracle(a, b, c=None):
        a, b = wide(a, b)
        a = a.T if attrs.get("transA") else a
        b = b.T if attrs.get("transB") else b
        y = attrs.get("alpha", 1.0) * (a @ b)
        return y if c is None else y + attrs.get("beta", 1.0) * wide(c)[0]

    return Case("Gemm", make, oracle, list(aclnn), attrs=attrs, id=id)


ADDMM, MATMUL_MULS = ["aclnnAddmm"], ["aclnnMatmul", "aclnnMuls"]
GEMMS = [
    gemm_case([16, 32], [4, 32], [4], "linear-transB-bias", ADDMM, transB=1),
    gemm_case([16, 4], [4, 32], None, "no-c", ["aclnnMatmul"], transB=0),
    gemm_case([4, 16], [4, 32], None, "no-c-transA", ["aclnnMatmul"], transA=1),
    gemm_case([5, 3], [6, 5], [3, 6], "both-transposed-full-c", ADDMM, transA=1, transB=1),
    gemm_case([3, 5], [5, 6], [3, 1], "c-column", ADDMM, alpha=0.5, beta=2.0),
    gemm_case([3, 5], [5, 6], [], "c-scalar", ADDMM, beta=-1.5),
    gemm_case([3, 5], [5, 6], None, "no-c-alpha", MATMUL_MULS, alpha=0.25),
    gemm_case([3, 0], [0, 4], [4], "k-0", ADDMM),
]


@pytest.mark.parametrize("case, dtype", params(GEMMS))
def test_gemm_gives_onnxs_result_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)


def test_gemm_refuses_k_that_differ_aclnn(rng, emulator):
    case = GEMMS[0]
    a, b, c = floats(rng, [3, 4], np.float32), floats(rng, [5, 6], np.float32), floats(rng, [5], np.float32)
    refused(case, [a, b, c], r"input A \[3,4\] has K = 4 but B \[5,6\] \(transposed\) has K = 6")


def test_gemm_refuses_c_that_does_not_broadcast_aclnn(rng, emulator):
    case = gemm_case([3, 4], [4, 5], [3], "bad-c", ADDMM)
    a, b, c = floats(rng, [3, 4], np.float32), floats(rng, [4, 5], np.float32), floats(rng, [3], np.float32)
    refused(case, [a, b, c], r"input C \[3\] does not broadcast to \[M, N\] \[3,5\]")


# ---------------------------------------------------------------------------------------------
# Softmax, LogSoftmax


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def softmax_case(op, shape, axis=None, id=""):
    formula = softmax if op == "Softmax" else log_softmax
    return Case(
        op,
        lambda rng, t: [floats(rng, shape, t, -4.0, 4.0)],
        lambda x: formula(*wide(x), -1 if axis is None else axis),
        [f"aclnn{op}"] if np.prod(shape) else [],
        attrs={} if axis is None else {"axis": axis},
        id=id,
    )


SOFTMAX = [
    *(
        c
        for op in ("Softmax", "LogSoftmax")
        for c in (
            softmax_case(op, [2, 3, 5], id="default-axis"),
            softmax_case(op, [2, 3, 5], 1, id="axis-1"),
            softmax_case(op, [4, 3, 2], -3, id="negative-axis"),
            softmax_case(op, [2, 1, 2, 1, 3, 1, 2, 1, 3], 4, id="nine-axes"),
            softmax_case(op, [0, 3], id="empty"),
        )
    ),
]


@pytest.mark.parametrize("case, dtype", params(SOFTMAX))
def test_softmax_ops_give_onnxs_results_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_ops_refuse_an_axis_out_of_range_aclnn(op, rng, emulator):
    case = softmax_case(op, [2, 3], 2)
    refused(case, [floats(rng, [2, 3], np.float32)], r"axis 2 is outside \[-2, 1\]")


# ---------------------------------------------------------------------------------------------
# NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss


def nll(x, target, weight=None, reduction="mean", ignore_index=None):
    """ONNX's NegativeLogLikelihoodLoss of x [N, C, d...] in float64."""
    classes = x.shape[1]
    weight = np.ones(classes) if weight is None else weight
    kept = np.ones(target.shape, bool) if ignore_index is None else target != ignore_index
    safe = np.where(kept, target, 0).astype(np.int64)
    picked = np.take_along_axis(np.moveaxis(x, 1, -1), safe[..., None], -1)[..., 0]
    weights = weight[safe] * kept
    loss = -picked * weights
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.array(loss.sum())
    return np.array(loss.sum() / weights.sum())


def targets(rng, shape, classes, index_type, ignore_index=None):
    t = rng.integers(0, classes, shape)
    if ignore_index is not None:
        t.flat[::3] = ignore_index  # every third ignored, the rest taken
    return t.astype(index_type)


def loss_case(op, shape, index_type, weighted, id, reduction=None, ignore_index=None, aclnn=(), outputs=1):
    classes = shape[1]
    target_shape = [shape[0], *shape[2:]]
    attrs = {}
    if reduction is not None:
        attrs["reduction"] = reduction
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index

    def make(rng, t):
        low, high = (-3.0, 0.0) if op == "NegativeLogLikelihoodLoss" else (-2.0, 2.0)
        inputs = [
            floats(rng, shape, t, low, high),
            targets(rng, target_shape, classes, index_type, ignore_index),
        ]
        if weighted:
            inputs.append(floats(rng, [classes], t, 0.25, 2.0))
        return inputs

    def oracle(x, target, weight=None):
        x, weight = wide(x)[0], None if weight is None else wide(weight)[0]
        log_prob = x if op == "NegativeLogLikelihoodLoss" else log_softmax(x, 1)
        loss = nll(log_prob, target, weight, reduction or "mean", ignore_index)
        return [loss, log_prob] if outputs == 2 else loss

    functions = [*(["aclnnLogSoftmax"] if op == "SoftmaxCrossEntropyLoss" else []), *aclnn]
    if not weighted:
        functions.append("aclnnInplaceOne")
    return Case(op, make, oracle, functions, attrs=attrs, outputs=outputs, id=id)


NLL = "NegativeLogLikelihoodLoss"
SCE = "SoftmaxCrossEntropyLoss"
LOSSES = [
    loss_case(NLL, [4, 5], I64, False, "nc-default-mean", aclnn=["aclnnNLLLoss"]),
    loss_case(NLL, [6, 3], I32, True, "nc-weighted-sum", "sum", aclnn=["aclnnNLLLoss"]),
    loss_case(NLL, [6, 4], I64, False, "nc-none-ignored", "none", 2, aclnn=["aclnnNLLLoss"]),
    loss_case(NLL, [5, 4], I32, True, "nc-weighted-mean-ignored", "mean", -1, aclnn=["aclnnNLLLoss"]),
    loss_case(NLL, [2, 4, 3], I64, True, "ncd-weighted-mean-ignored", None, 1, aclnn=["aclnnNLLLoss2d"]),
    loss_case(NLL, [2, 3, 2, 3], I32, False, "nchw-none", "none", aclnn=["aclnnNLLLoss2d"]),
    loss_case(NLL, [2, 3, 2, 2, 2], I64, True, "ncddd-sum-ignored", "sum", 0, aclnn=["aclnnNLLLoss2d"]),
    loss_case(NLL, [0, 3], I64, False, "empty-sum", "sum", aclnn=["aclnnNLLLoss"]),
    loss_case(SCE, [4, 5], I64, False, "nc-default-mean", aclnn=["aclnnNLLLoss"]),
    loss_case(SCE, [6, 3], I32, True, "nc-weighted-none-log-prob", "none", outputs=2, aclnn=["aclnnNLLLoss"]),
    loss_case(
        SCE, [2, 4, 3], I64, True, "ncd-mean-ignored-log-prob", "mean", 3, ["aclnnNLLLoss2d"], outputs=2
    ),
    loss_case(SCE, [2, 3, 2, 3], I32, False, "nchw-sum-ignored", "sum", 1, aclnn=["aclnnNLLLoss2d"]),
    loss_case(SCE, [2, 3, 2, 1, 2], I64, False, "ncddd-none", "none", aclnn=["aclnnNLLLoss2d"]),
]


@pytest.mark.parametrize("case, dtype", params(LOSSES))
def test_losses_give_onnxs_results_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)


@pytest.mark.parametrize(
    "op, names",
    [(NLL, r"input 'target' \[4,2\] must be \[4,3\]"), (SCE, r"input 'labels' \[4,2\] must be \[4,3\]")],
)
def test_losses_refuse_targets_of_another_shape_aclnn(op, names, rng, emulator):
    case = loss_case(op, [4, 5, 3], I64, False, "bad-target")
    x = floats(rng, [4, 5, 3], np.float32, -3.0, 0.0)
    refused(case, [x, targets(rng, [4, 2], 5, I64)], names)


def test_losses_refuse_a_weight_per_class_missing_aclnn(rng, emulator):
    case = loss_case(NLL, [4, 5], I64, True, "bad-weight")
    x, t = floats(rng, [4, 5], np.float32, -3.0, 0.0), targets(rng, [4], 5, I64)
    refused(case, [x, t, floats(rng, [4], np.float32)], r"input 'weight' \[4\] must be \[5\]")


def test_losses_fail_on_a_target_outside_the_classes_aclnn(rng, emulator):
    # The device has no defined result: the emulator faults the stream's work. The kernel's own
    # wait reports it with the rule; the CANN execution provider's wait, with the runtime's code.
    case = loss_case(NLL, [3, 4], I64, False, "bad-class", "sum")
    inputs = [floats(rng, [3, 4], np.float32, -3.0, 0.0), np.array([0, 7, 1], np.int64)]
    if aclnn_emulator.through_cann_ep():
        with pytest.raises(Exception, match="507015"):
            run(case, inputs)
    else:
        refused(case, inputs, r"target 7 at position 1 is outside \[0, 4\)")


# ---------------------------------------------------------------------------------------------
# The emulated first phases called directly: the vendor's rules the kernels never break.

P, I64C = ctypes.c_void_p, ctypes.c_int64
PARAM_NULLPTR, PARAM_INVALID = 161001, 161002
ACL = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, BF16: 27, I64: 9, I32: 3}


@pytest.fixture
def vendor(emulator):
    phases = FirstPhases(emulator, "libopapi_math.so")
    ops = phases.ops
    tail = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(P)]
    ops.aclnnMatmulGetWorkspaceSize.argtypes = [P, P, P, ctypes.c_int8, *tail]
    for name in ("aclnnSoftmaxGetWorkspaceSize", "aclnnLogSoftmaxGetWorkspaceSize"):
        getattr(ops, name).argtypes = [P, I64C, P, *tail]
    for name in ("aclnnNLLLossGetWorkspaceSize", "aclnnNLLLoss2dGetWorkspaceSize"):
        getattr(ops, name).argtypes = [P, P, P, I64C, I64C, P, P, *tail]

    def tensor(shape, dtype=np.float32):
        return phases.tensor(shape, ACL[np.dtype(dtype)])

    def call(name, *args):
        """The first phase's status and message."""
        size, executor = ctypes.c_uint64(), P()
        code = getattr(ops, f"{name}GetWorkspaceSize")(*args, ctypes.byref(size), ctypes.byref(executor))
        return phases.status(code, executor)

    yield type("Vendor", (), {"tensor": staticmethod(tensor), "call": staticmethod(call)})
    phases.close()


F32, F16 = np.float32, np.float16


@pytest.mark.parametrize(
    ("a", "b", "out", "cube", "code", "rule"),
    [
        (([3, 4], F32), ([4, 5], F32), ([3, 5], F32), 0, 0, ""),
        (([3, 4], F16), ([4, 5], F16), ([3, 5], F32), 0, 0, ""),
        (([3, 4], F16), ([4, 5], F32), ([3, 5], F32), 0, 0, ""),
        (([3, 4], BF16), ([4, 5], F16), ([3, 5], BF16), 0, PARAM_INVALID, "do not deduce on A2/A3"),
        (([3, 4], F32), ([4, 5], F32), ([3, 5], F16), 0, PARAM_INVALID, "out dtype FLOAT16 is not the deduced"),
        (([3, 4], F16), ([4, 5], F16), ([3, 5], F16), 3, PARAM_INVALID, "USE_HF32) takes FLOAT only"),
        (([3, 4], BF16), ([4, 5], BF16), ([3, 5], BF16), 2, PARAM_INVALID, "USE_FP16) takes no BFLOAT16"),
        (([3, 4], F32), ([4, 5], F32), ([3, 5], F32), 5, PARAM_INVALID, "cubeMathType 5 is not one of 0 to 4"),
        (([1] * 5 + [3, 4], F32), ([4, 5], F32), ([1] * 5 + [3, 5], F32), 0, PARAM_INVALID, "not 1 to 6"),
        (([3, 4], F32), ([5, 6], F32), ([3, 6], F32), 0, PARAM_INVALID, "K axes"),
        (([2, 3, 4], F32), ([3, 4, 5], F32), ([2, 3, 5], F32), 0, PARAM_INVALID, "do not broadcast"),
        (([3, 4], F32), ([4, 5], F32), ([5, 3], F32), 0, PARAM_INVALID, "out shape [5, 3] is not [3, 5]"),
    ],
    ids=["f32", "f16-to-f32", "f16-f32", "bf16-f16", "f32-to-f16", "hf32-f16", "fp16-bf16", "cube-5", "rank-7",
         "k", "batch", "out-shape"],
)  # fmt: skip
def test_vendor_matmul_checks_what_its_page_lists_aclnn(vendor, a, b, out, cube, code, rule):
    args = (vendor.tensor(*a), vendor.tensor(*b), vendor.tensor(*out), cube)
    got, message = vendor.call("aclnnMatmul", *args)
    assert got == code, message
    assert rule in message


def test_vendor_matmul_refuses_null_out_aclnn(vendor):
    got, message = vendor.call("aclnnMatmul", vendor.tensor([3, 4]), vendor.tensor([4, 5]), None, 0)
    assert got == PARAM_NULLPTR and "out is NULL" in message


@pytest.mark.parametrize("name", ["aclnnSoftmax", "aclnnLogSoftmax"])
def test_vendor_softmax_checks_dim_and_out_aclnn(vendor, name):
    x = vendor.tensor([2, 3])
    assert vendor.call(name, x, -2, vendor.tensor([2, 3]))[0] == 0
    got, message = vendor.call(name, x, 2, vendor.tensor([2, 3]))
    assert got == PARAM_INVALID and "dim 2 is outside" in message
    got, message = vendor.call(name, x, 1, vendor.tensor([3, 2]))
    assert got == PARAM_INVALID and "out shape [3, 2] is not self's [2, 3]" in message


@pytest.mark.parametrize(
    ("name", "self", "target", "weight", "reduction", "out", "code", "rule"),
    [
        ("aclnnNLLLoss", ([4, 5], F32), ([4], I64), ([5], F32), 1, [], 0, ""),
        ("aclnnNLLLoss", ([5], F32), ([], I32), ([5], F32), 0, [1], 0, ""),
        ("aclnnNLLLoss", ([4, 5], F32), ([4], I64), ([5], F16), 1, [], PARAM_INVALID, "must equal self dtype"),
        ("aclnnNLLLoss", ([4, 5], F32), ([4], F32), ([5], F32), 1, [], PARAM_INVALID, "target dtype FLOAT"),
        ("aclnnNLLLoss", ([4, 5], F32), ([4], I64), ([5], F32), 3, [], PARAM_INVALID, "reduction 3"),
        ("aclnnNLLLoss", ([2, 4, 5], F32), ([2, 4], I64), ([5], F32), 1, [], PARAM_INVALID, "1 or 2 axes"),
        ("aclnnNLLLoss", ([4, 5], F32), ([3], I64), ([5], F32), 1, [], PARAM_INVALID, "takes target [N]"),
        ("aclnnNLLLoss", ([4, 5], F32), ([4], I64), ([4], F32), 1, [], PARAM_INVALID, "weight [4] must be [5]"),
        ("aclnnNLLLoss", ([4, 5], F32), ([4], I64), ([5], F32), 0, [], PARAM_INVALID, "out [] must be [4]"),
        ("aclnnNLLLoss2d", ([2, 3, 4, 5], F16), ([2, 4, 5], I32), ([3], F16), 0, [2, 4, 5], 0, ""),
        ("aclnnNLLLoss2d", ([2, 3, 4], F32), ([2, 4], I64), ([3], F32), 1, [], PARAM_INVALID, "4 axes"),
        ("aclnnNLLLoss2d", ([2, 3, 4, 5], F32), ([2, 5, 4], I64), ([3], F32), 2, [], PARAM_INVALID, "does not match"),
        ("aclnnNLLLoss2d", ([2, 3, 4, 5], F32), ([2, 4, 5], I64), ([3], F32), 0, [2, 20], PARAM_INVALID, "target's"),
    ],
)  # fmt: skip
def test_vendor_nll_losses_check_what_their_pages_list_aclnn(
    vendor, name, self, target, weight, reduction, out, code, rule
):
    args = [vendor.tensor(*self), vendor.tensor(*target), vendor.tensor(*weight), reduction, -100]
    got, message = vendor.call(name, *args, vendor.tensor(out, self[1]), vendor.tensor([1], self[1]))
    assert got == code, message
    assert rule in message
