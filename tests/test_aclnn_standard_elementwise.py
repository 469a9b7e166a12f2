"""The elementwise standard ops on the NPU (native/aclnn/standard/elementwise.cc) against NumPy's
float64 formulas of ONNX's definitions: broadcasting both ways, every type each op takes, and
refusals naming the op and the inputs."""

import numpy as np
import pytest
from aclnn_standard import (
    BOOL,
    F16,
    F32,
    FLOATS,
    I32,
    I64,
    NUMBERS,
    Case,
    check,
    floats,
    params,
    refused,
    values,
    wide,
)


def numbers(rng, shape, dtype, low=-4, high=5):
    return values(rng, shape, dtype, low, high)


def nonzero(rng, shape, dtype):
    value = numbers(rng, shape, dtype)
    return np.where(value == 0, np.ones_like(value), value)


def pair(a_shape, b_shape, make=numbers, make_b=None):
    return lambda rng, t: [make(rng, a_shape, t), (make_b or make)(rng, b_shape, t)]


def binary_oracle(f):
    return lambda a, b: f(*wide(a, b))


def truncating_div(a, b):
    if a.dtype in FLOATS:
        return binary_oracle(np.divide)(a, b)
    return np.trunc(a.astype(np.float64) / b).astype(a.dtype)


def masks(rng, shape, _dtype):
    return values(rng, shape, BOOL)


BINARY = [
    Case(
        "Add",
        pair([2, 1, 3], [4, 1]),
        binary_oracle(np.add),
        ["aclnnAdd"],
        dtypes=NUMBERS,
        id="both-broadcast",
    ),
    Case("Sub", pair([2, 3], [3]), binary_oracle(np.subtract), ["aclnnSub"], dtypes=NUMBERS),
    Case("Mul", pair([1, 8, 1], [4]), binary_oracle(np.multiply), ["aclnnMul"], dtypes=NUMBERS),
    Case("Div", pair([3, 4], [3, 4], numbers, nonzero), truncating_div, ["aclnnDiv"], id="floats"),
    Case(
        "Div",
        pair([3, 4], [4], numbers, nonzero),
        truncating_div,
        ["aclnnDivMod"],
        dtypes=(I32, I64),
        id="ints",
    ),
    Case(
        "Pow",
        pair([3, 4], [4], lambda r, s, t: floats(r, s, t, 0.5, 2.0)),
        binary_oracle(np.power),
        ["aclnnPowTensorTensor"],
    ),
    Case(
        "Equal",
        pair([3, 4], [4], lambda r, s, t: numbers(r, s, t, 0, 2)),
        np.equal,
        ["aclnnEqTensor"],
        dtypes=NUMBERS,
    ),
    Case("Less", pair([3, 4], [3, 1]), np.less, ["aclnnLtTensor"], dtypes=NUMBERS),
    Case(
        "LessOrEqual",
        pair([3, 4], [4], lambda r, s, t: numbers(r, s, t, 0, 2)),
        np.less_equal,
        ["aclnnLeTensor"],
        dtypes=NUMBERS,
    ),
    Case("Greater", pair([2, 3], [2, 3]), np.greater, ["aclnnGtTensor"], dtypes=NUMBERS),
    Case("GreaterOrEqual", pair([2, 3], [1]), np.greater_equal, ["aclnnGeTensor"], dtypes=NUMBERS),
    Case("And", pair([3, 4], [4], masks), np.logical_and, ["aclnnLogicalAnd"], dtypes=(BOOL,)),
    Case("Or", pair([3, 4], [3, 1], masks), np.logical_or, ["aclnnLogicalOr"], dtypes=(BOOL,)),
    Case("Xor", pair([3, 4], [4], masks), np.logical_xor, ["aclnnLogicalXor"], dtypes=(BOOL,)),
]


def unary(op, function, oracle, make=numbers, dtypes=FLOATS):
    return Case(
        op, lambda rng, t: [make(rng, [2, 3, 5], t)], lambda x: oracle(*wide(x)), [function], dtypes=dtypes
    )


def positive(rng, shape, dtype):
    return floats(rng, shape, dtype, 0.25, 4.0)


UNARY = [
    unary("Not", "aclnnLogicalNot", np.logical_not, masks, (BOOL,)),
    unary("Neg", "aclnnNeg", np.negative, dtypes=NUMBERS),
    unary("Abs", "aclnnAbs", np.abs, dtypes=NUMBERS),
    unary("Exp", "aclnnExp", np.exp),
    unary("Log", "aclnnLog", np.log, positive),
    unary("Sqrt", "aclnnSqrt", np.sqrt, positive),
    unary("Reciprocal", "aclnnReciprocal", np.reciprocal, positive),
    unary("Sigmoid", "aclnnSigmoid", lambda x: 1 / (1 + np.exp(-x))),
    unary("Tanh", "aclnnTanh", np.tanh),
    unary("Sin", "aclnnSin", np.sin),
    unary("Cos", "aclnnCos", np.cos),
    unary("Relu", "aclnnRelu", lambda x: np.maximum(x, 0)),
    unary("Floor", "aclnnFloor", np.floor),
    unary("Ceil", "aclnnCeil", np.ceil),
]


def erf(x):
    from math import erf as scalar_erf

    return np.vectorize(scalar_erf)(x)


UNARY.append(unary("Erf", "aclnnErf", erf))


def variadic(op, function, oracle, shapes):
    return Case(
        op,
        lambda rng, t: [numbers(rng, s, t) for s in shapes],
        lambda *xs: oracle(wide(*xs)),
        [function],
        dtypes=NUMBERS,
        id=f"{len(shapes)}-inputs",
    )


VARIADIC = [
    variadic("Sum", "aclnnAdd", lambda xs: np.sum(np.broadcast_arrays(*xs), axis=0), [[2, 3], [3], [2, 1]]),
    variadic("Max", "aclnnMaximum", lambda xs: np.max(np.broadcast_arrays(*xs), axis=0), [[2, 3], [3]]),
    variadic(
        "Min", "aclnnMinimum", lambda xs: np.min(np.broadcast_arrays(*xs), axis=0), [[4, 1], [3], [4, 3]]
    ),
]

WHERE = [
    Case(
        "Where",
        lambda rng, t: [masks(rng, [3, 1, 4], t), numbers(rng, [2, 4], t), numbers(rng, [1], t)],
        lambda c, a, b: np.where(c, *wide(a, b)),
        ["aclnnSWhere"],
        dtypes=NUMBERS,
        id="three-way-broadcast",
    )
]


def cast_case(source, target):
    from onnx import helper

    return Case(
        "Cast",
        lambda rng, t: [
            numbers(rng, [3, 5], source, -3, 4) if source != BOOL else masks(rng, [3, 5], source)
        ],
        lambda x: (
            x.astype(np.float64).astype(target) if target != BOOL else x.astype(np.float64) != 0
        ).astype(np.float64 if target in FLOATS else target),
        ["aclnnCast"],
        attrs={"to": helper.np_dtype_to_tensor_dtype(target) if target.name != "bfloat16" else 16},
        dtypes=(source,),
        id=f"to-{target.name}",
    )


CASTS = [cast_case(s, t) for s in (F32, F16, I64, BOOL) for t in (*FLOATS, I32, I64, BOOL) if s != t]


def gelu_oracle(approximate):
    def oracle(x):
        v = wide(x)[0]
        if approximate == "tanh":
            return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))
        return 0.5 * v * (1 + erf(v / np.sqrt(2)))

    return oracle


GELUS = [
    Case(
        "Gelu",
        lambda rng, t: [floats(rng, [2, 3, 5], t, -4.0, 4.0)],
        gelu_oracle(approximate or "none"),
        ["aclnnGeluV2"],
        attrs={} if approximate is None else {"approximate": approximate},
        id=approximate or "default",
    )
    for approximate in (None, "none", "tanh")
]


def with_nans(rng, shape, dtype):
    x = floats(rng, shape, dtype)
    x.flat[::3] = np.nan
    x.flat[1::7] = np.inf
    return x


ISNANS = [
    Case("IsNaN", lambda rng, t: [with_nans(rng, [3, 7], t)], np.isnan, ["aclnnNeTensor"], id="nan-and-inf")
]


def python_remainder(a, b):
    """ONNX's fmod=0 (integers): the remainder with the divisor's sign, as Python's %."""
    return np.mod(a.astype(np.int64), b.astype(np.int64))


def c_fmod(a, b):
    """ONNX's fmod=1: C's fmod, the dividend's sign."""
    if a.dtype in FLOATS:
        return np.fmod(*wide(a, b))
    return np.fmod(a.astype(np.int64), b.astype(np.int64))


def signed_nonzero(rng, shape, dtype):
    value = numbers(rng, shape, dtype, -7, 8)
    return np.where(value == 0, np.full_like(value, 3), value)


MODS = [
    Case(
        "Mod",
        pair([3, 4], [4], lambda r, s, t: numbers(r, s, t, -20, 21), signed_nonzero),
        python_remainder,
        ["aclnnRemainderTensorTensor"],
        dtypes=(I32, I64),
        id="floor-ints-broadcast",
    ),
    Case(
        "Mod",
        pair([3, 4], [3, 1], lambda r, s, t: numbers(r, s, t, -20, 21), signed_nonzero),
        c_fmod,
        ["aclnnFmodTensor"],
        attrs={"fmod": 1},
        dtypes=(I32, I64),
        id="fmod-ints",
    ),
    Case(
        "Mod",
        pair(
            [2, 5],
            [5],
            lambda r, s, t: floats(r, s, t, -6.0, 6.0),
            lambda r, s, t: floats(r, s, t, 0.75, 2.5),
        ),
        c_fmod,
        ["aclnnFmodTensor"],
        attrs={"fmod": 1},
        id="fmod-floats",
    ),
]


@pytest.mark.parametrize(
    "case, dtype", params([*BINARY, *UNARY, *VARIADIC, *WHERE, *CASTS, *GELUS, *ISNANS, *MODS])
)
def test_elementwise_ops_give_onnxs_results_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)


def test_shapes_that_do_not_broadcast_are_refused_naming_the_op_aclnn(rng, emulator):
    case = BINARY[0]
    a, b = floats(rng, [2, 3], F32), floats(rng, [4], F32)
    refused(case, [a, b], r"input 1 \[4\] does not broadcast with \[2,3\]")


def test_mod_of_floats_refuses_fmod_0_aclnn(rng, emulator):
    case = Case("Mod", None, None, [], attrs={"fmod": 0})
    a, b = floats(rng, [2, 3], F32), floats(rng, [3], F32, 1.0, 2.0)
    refused(case, [a, b], "fmod=0 takes integers; float32 inputs need fmod=1")


def test_gelu_refuses_an_unknown_approximation_aclnn(rng, emulator):
    case = Case("Gelu", None, None, [], attrs={"approximate": "sigmoid"})
    refused(case, [floats(rng, [2, 3], F32)], "attribute 'approximate' is \"sigmoid\"")
