"""The layout standard ops on the NPU (native/aclnn/standard/layout.cc) against NumPy formulas of
ONNX's definitions: views (values only: no aclnn function runs for them), permutes, broadcasts,
joins, slices with ONNX's clamping and negative steps, splits, pads, tiles, triangles, ranges and
fills, in every type each op takes, and refusals naming the op and the rule before any vendor call."""

import ctypes
import math
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from aclnn_standard import (
    ALL,
    F32,
    FLOATS,
    I32,
    I64,
    OPSET,
    Case,
    check,
    params,
    refused,
    values,
    wide,
)
from onnx import helper, numpy_helper

from ort_ascend_ops import aclnn_emulator
from ort_ascend_ops.cann_ep.aclnn_ops import to_aclnn_domain

INT_MAX = np.iinfo(np.int64).max


def ints(*v, dtype=I64):
    return np.array(v, dtype=dtype)


def data(shape, *host):
    """Inputs: data of ``shape``, then the host inputs as given."""
    return lambda rng, t: [values(rng, shape, t), *host]


def same(f):
    """An oracle applying ``f`` to the data (in float64 for floats) and ignoring the host inputs."""
    return lambda x, *host: f(*wide(x))


# ---- Views: ONNX's output shape, the input's values.


def reshape_shape(x, shape, allowzero=0):
    """ONNX Reshape: 0 copies the input's dimension (unless allowzero), -1 takes the rest."""
    out = [int(x.shape[k]) if d == 0 and not allowzero else int(d) for k, d in enumerate(shape)]
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = x.size // known
    return out


VIEWS = [
    Case(
        "Reshape",
        data([2, 3, 4], ints(0, -1)),
        lambda x, s: np.reshape(wide(x)[0], reshape_shape(x, s)),
        [],
        dtypes=ALL,
        constants=(1,),
        id="copy-and-infer",
    ),
    Case(
        "Reshape",
        data([2, 3, 4], ints(4, -1, 2)),
        lambda x, s: np.reshape(wide(x)[0], reshape_shape(x, s)),
        [],
        constants=(1,),
        id="infer-middle",
    ),
    Case(
        "Reshape",
        data([0, 3], ints(3, 0)),
        lambda x, s: np.reshape(wide(x)[0], reshape_shape(x, s, 1)),
        [],
        attrs={"allowzero": 1},
        constants=(1,),
        id="allowzero-empty",
    ),
    Case(
        "Squeeze",
        data([3, 1, 4, 1], ints(-1, 1)),
        same(lambda x: np.squeeze(x, (1, 3))),
        [],
        dtypes=ALL,
        constants=(1,),
        id="axes",
    ),
    Case("Squeeze", data([1, 3, 1]), same(np.squeeze), [], id="all-ones"),
    Case(
        "Unsqueeze",
        data([3, 4], ints(0, -1)),
        same(lambda x: x.reshape(1, 3, 4, 1)),
        [],
        dtypes=ALL,
        constants=(1,),
        id="both-ends",
    ),
    Case("Unsqueeze", data([], ints(0)), same(lambda x: x.reshape(1)), [], constants=(1,), id="scalar"),
    Case("Flatten", data([2, 3, 4]), same(lambda x: x.reshape(2, 12)), [], dtypes=ALL, id="default-axis"),
    Case(
        "Flatten",
        data([2, 3, 4]),
        same(lambda x: x.reshape(6, 4)),
        [],
        attrs={"axis": -1},
        id="negative-axis",
    ),
    Case("Flatten", data([2, 3, 4]), same(lambda x: x.reshape(1, 24)), [], attrs={"axis": 0}, id="axis-0"),
    Case("Flatten", data([2, 3, 4]), same(lambda x: x.reshape(24, 1)), [], attrs={"axis": 3}, id="axis-rank"),
    Case("Identity", data([2, 5]), same(lambda x: x), [], dtypes=ALL),
]


# ---- One aclnn function each.

TRANSPOSES = [
    Case("Transpose", data([2, 3, 4]), same(np.transpose), ["aclnnPermute"], dtypes=ALL, id="reversed"),
    Case(
        "Transpose",
        data([2, 3, 4, 5]),
        same(lambda x: np.transpose(x, (1, 3, 0, 2))),
        ["aclnnPermute"],
        attrs={"perm": [1, 3, 0, 2]},
        id="perm",
    ),
]


def expand(x, shape):
    """ONNX Expand: x * ones(shape), broadcasting both ways."""
    return np.broadcast_to(wide(x)[0], np.broadcast_shapes(x.shape, tuple(shape)))


EXPANDS = [
    Case(
        "Expand", data([3, 1], ints(2, 1, 4)), expand, ["aclnnExpand"], dtypes=ALL, constants=(1,), id="grow"
    ),
    Case("Expand", data([2, 1, 4], ints(3, 1)), expand, ["aclnnExpand"], constants=(1,), id="shape-smaller"),
]


def concat_case(shapes, axis, id):
    return Case(
        "Concat",
        lambda rng, t: [values(rng, s, t) for s in shapes],
        lambda *xs: np.concatenate(wide(*xs), axis=axis),
        ["aclnnCat"],
        attrs={"axis": axis},
        dtypes=ALL,
        id=id,
    )


CONCATS = [
    concat_case([[2, 3], [2, 1], [2, 4]], -1, "last-axis"),
    concat_case([[2, 3], [0, 3], [1, 3]], 0, "empty-input"),
]


def onnx_slice(x, starts, ends, axes=None, steps=None):
    """ONNX Slice: per axis, starts and ends counted from the end when negative, then clamped to
    [0, dim] (positive steps) or [0, dim - 1] and [-1, dim - 1] (negative steps)."""
    x = wide(x)[0]
    axes = list(range(len(starts))) if axes is None else [a + x.ndim if a < 0 else a for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        dim = x.shape[axis]
        start, end = (int(v) + dim if v < 0 else int(v) for v in (start, end))
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        x = np.take(x, np.arange(start, end, step), axis=axis)
    return x


def slice_case(shape, starts, ends, axes=None, steps=None, index=I64, id="", dtypes=FLOATS):
    host = [ints(*starts, dtype=index), ints(*ends, dtype=index)]
    host += [None if axes is None else ints(*axes, dtype=index)]
    host += [None if steps is None else ints(*steps, dtype=index)]
    while host[-1] is None:
        host.pop()
    empty = onnx_slice(np.zeros(shape), starts, ends, axes, steps).size == 0
    aclnn = [] if empty else ["aclnnSliceV2"] + (["aclnnFlip"] if steps and min(steps) < 0 else [])
    return Case(
        "Slice",
        data(shape, *host),
        lambda x, *_: onnx_slice(x, starts, ends, axes, steps),
        aclnn,
        dtypes=dtypes,
        constants=tuple(range(1, 1 + len(host))),
        id=id,
    )


SLICES = [
    slice_case([5, 6], [1, -4], [4, INT_MAX], id="int-max-end", dtypes=ALL),
    slice_case([4, 7, 3], [-100, 1], [100, -1], axes=[-1, 1], steps=[1, 2], id="clamped-axes-steps"),
    slice_case([6, 5], [-1, 4], [-INT_MAX, 0], axes=[0, 1], steps=[-2, -1], id="negative-steps", dtypes=ALL),
    slice_case([6, 5], [2], [1], index=I32, id="empty-int32"),
    slice_case([8], [5], [1], steps=[-3], index=I32, id="negative-step-int32"),
]


def split_case(shape, axis, make_host, sizes, attrs=None, id=""):
    def oracle(x, *_):
        return np.split(wide(x)[0], np.cumsum(sizes)[:-1], axis=axis)

    return Case(
        "Split",
        data(shape, *make_host),
        oracle,
        ["aclnnSplitWithSize"],
        attrs={"axis": axis, **(attrs or {})},
        dtypes=ALL,
        constants=(1,) if make_host else (),
        outputs=len(sizes),
        id=id,
    )


SPLITS = [
    split_case([4, 6], -1, [ints(2, 3, 1)], [2, 3, 1], id="sizes"),
    split_case([7, 2], 0, [], [3, 3, 1], attrs={"num_outputs": 3}, id="num-outputs-uneven"),
    split_case([2, 6], 1, [], [2, 2, 2], id="equal-by-outputs"),
    split_case([3, 4], 1, [ints(0, 4)], [0, 4], id="empty-piece"),
]


def onnx_pad(x, pads, value=None, axes=None):
    """ONNX Pad, constant: pads [begin per axis..., end per axis...], negative pads crop."""
    x = wide(x)[0]
    axes = range(x.ndim) if axes is None else [a + x.ndim if a < 0 else a for a in axes]
    fill = 0 if value is None else wide(value)[0].item()
    width = [(0, 0)] * x.ndim
    for i, axis in enumerate(axes):
        width[axis] = (int(pads[i]), int(pads[i + len(axes)]))
    grown = np.pad(x, [(max(b, 0), max(e, 0)) for b, e in width], constant_values=fill)
    crop = tuple(slice(max(-b, 0), grown.shape[k] - max(-e, 0)) for k, (b, e) in enumerate(width))
    return grown[crop]


def pad_case(shape, pads, value=None, axes=None, id="", dtypes=ALL):
    def make(rng, t):
        host = [ints(*pads), None if value is None else np.array(value).astype(t)]
        if axes is not None:
            host.append(ints(*axes))
        return [values(rng, shape, t), *host]

    constants = (1, 2, 3) if axes is not None else (1, 2)
    return Case(
        "Pad",
        make,
        lambda x, p, v=None, a=None: onnx_pad(x, p, v, a),
        ["aclnnConstantPadNd"],
        dtypes=dtypes,
        constants=constants,
        id=id,
    )


PADS = [
    pad_case([2, 3], [1, 0, 2, 3], value=1, id="value"),
    pad_case([3, 4, 2], [-1, 2, 1, -2], axes=[0, -2], id="crop-and-axes", dtypes=FLOATS),
    pad_case([2, 3], [0, 1, 1, 0], id="default-zero", dtypes=(F32, I64)),
    Case(
        "Pad",
        data([0, 2], ints(1, 0, 1, 1), np.array(5, np.float32)),
        onnx_pad,
        ["aclnnInplaceFillScalar"],
        dtypes=(F32,),
        constants=(1, 2),
        id="empty-input",
    ),
]

TILES = [
    Case(
        "Tile",
        data([2, 3, 1], ints(2, 1, 3)),
        lambda x, r: np.tile(wide(x)[0], tuple(r)),
        ["aclnnRepeat"],
        dtypes=ALL,
        constants=(1,),
    ),
    Case(
        "Tile",
        data([2, 3], ints(0, 2)),
        lambda x, r: np.tile(wide(x)[0], tuple(r)),
        [],
        constants=(1,),
        id="zero-repeats",
    ),
]


def trilu(upper, k=0):
    return lambda x, *_: (np.triu if upper else np.tril)(wide(x)[0], k)


TRILUS = [
    Case("Trilu", data([4, 5]), trilu(True), ["aclnnTriu"], dtypes=ALL, id="upper-default"),
    Case(
        "Trilu",
        data([2, 4, 3], ints(-1)),
        trilu(False, -1),
        ["aclnnTril"],
        attrs={"upper": 0},
        constants=(1,),
        id="lower-k-negative",
    ),
    Case(
        "Trilu", data([3, 5], ints(2)), trilu(True, 2), ["aclnnTriu"], constants=(1,), id="upper-k-positive"
    ),
]


def range_case(start, limit, delta, id):
    def make(_rng, t):
        return [np.array(v).astype(t) for v in (start, limit, delta)]

    def oracle(s, lim, d):
        count = max(math.ceil((float(lim) - float(s)) / float(d)), 0)
        return (s.astype(np.float64) + np.arange(count) * d.astype(np.float64)).astype(
            np.float64 if s.dtype == F32 else s.dtype
        )

    return Case("Range", make, oracle, ["aclnnArange"], dtypes=(F32, I32, I64), constants=(0, 1, 2), id=id)


RANGES = [range_case(1, 12, 3, "up"), range_case(5, -4, -2, "down")]


def constant_of_shape(value, id):
    attrs = {} if value is None else {"value": numpy_helper.from_array(np.array([value], np.float32))}
    return Case(
        "ConstantOfShape",
        lambda _rng, _t: [ints(2, 0, 3) if id == "empty" else ints(2, 3)],
        lambda s: np.full(tuple(s), 0.0 if value is None else value),
        [] if id == "empty" else ["aclnnInplaceFillScalar"],
        attrs=attrs,
        dtypes=(I64,),
        constants=(0,),
        id=id,
    )


FILLS = [
    constant_of_shape(None, "default-zero"),
    constant_of_shape(2.5, "value"),
    constant_of_shape(1.0, "empty"),
]


def shape_case(shape, id, **attrs):
    """ONNX Shape: the dims from start to end, each clamped to the rank after counting negative
    ones from the end; no aclnn function runs (the dims are uploaded)."""

    def oracle(x):
        rank = x.ndim
        start, end = (attrs.get(k, d) for k, d in (("start", 0), ("end", rank)))
        start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
        return np.array(x.shape[start:end], np.int64)

    return Case("Shape", lambda rng, t: [values(rng, shape, t)], oracle, [], attrs=attrs, dtypes=ALL, id=id)


SHAPES = [
    shape_case([2, 3, 4], "all"),
    shape_case([2, 3, 4], "start-end", start=1, end=-1),
    shape_case([2, 3, 4, 5], "negative-start", start=-2),
    shape_case([2, 0, 3], "empty-tensor"),
    shape_case([2, 3], "end-past-rank", start=1, end=9),
    shape_case([2, 3], "nothing", start=2),
]

CASES = [
    *VIEWS,
    *TRANSPOSES,
    *EXPANDS,
    *CONCATS,
    *SLICES,
    *SPLITS,
    *PADS,
    *TILES,
    *TRILUS,
    *RANGES,
    *FILLS,
    *SHAPES,
]


@pytest.mark.parametrize("case, dtype", params(CASES))
def test_layout_ops_give_onnxs_results_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)


# Each: the node's inputs for float32 (x(shape): data), its host inputs, attributes and output count,
# the rule the error names, and the aclnn function that must not have run.
REFUSALS = {
    "Reshape": (lambda x: [x([2, 3]), ints(4, -1)], (1,), {}, 1, r"cannot take shape \[4,-1\]", None),
    "Squeeze": (
        lambda x: [x([3, 2]), ints(1)],
        (1,),
        {},
        1,
        r"axis 1 of input \[3,2\] has size 2, not 1",
        None,
    ),
    "Unsqueeze": (lambda x: [x([3]), ints(0, -3)], (1,), {}, 1, r"name axis 0 twice", None),
    "Flatten": (lambda x: [x([2, 3])], (), {"axis": 3}, 1, r"axis 3 is outside \[-2, 2\]", None),
    "Transpose": (
        lambda x: [x([2, 3])],
        (),
        {"perm": [1, 1]},
        1,
        r"perm \[1,1\] is not a permutation",
        "aclnnPermute",
    ),
    "Expand": (
        lambda x: [x([3, 2]), ints(4)],
        (1,),
        {},
        1,
        r"does not broadcast with shape \[4\]",
        "aclnnExpand",
    ),
    "Concat": (
        lambda x: [x([2, 3]), x([3, 1])],
        (),
        {"axis": 1},
        1,
        r"input 1 \[3,1\] does not match input 0 \[2,3\] outside axis 1",
        "aclnnCat",
    ),
    "Slice": (
        lambda x: [x([4]), ints(0), ints(4), ints(0), ints(0)],
        (1, 2, 3, 4),
        {},
        1,
        r"steps\[0\] is 0",
        "aclnnSliceV2",
    ),
    "Split": (
        lambda x: [x([4, 6]), ints(2, 3)],
        (1,),
        {"axis": -1},
        2,
        r"sums to 5, not axis 1's 6",
        "aclnnSplitWithSize",
    ),
    "Pad": (
        lambda x: [x([2, 3]), ints(1, 1, 1, 1)],
        (1,),
        {"mode": "reflect"},
        1,
        r"mode 'reflect' is not supported on the NPU \(constant only\)",
        "aclnnConstantPadNd",
    ),
    "Tile": (
        lambda x: [x([2, 3]), ints(2)],
        (1,),
        {},
        1,
        r"repeats \[2\] has 1 values for input \[2,3\]",
        "aclnnRepeat",
    ),
    "Trilu": (
        lambda x: [x([5])],
        (),
        {},
        1,
        r"input \[5\] has fewer than the 2 axes of a matrix",
        "aclnnTriu",
    ),
    "Range": (
        lambda x: [np.float32(0), np.float32(3), np.float32(0)],
        (0, 1, 2),
        {},
        1,
        r"delta is 0",
        "aclnnArange",
    ),
}


@pytest.mark.parametrize("op", sorted(REFUSALS), ids=lambda op: f"aclnn-{op}")
def test_layout_ops_refuse_what_onnx_forbids_before_any_vendor_call_aclnn(op, rng, emulator):
    make, constants, attrs, outputs, match, function = REFUSALS[op]
    inputs = [np.asarray(a) for a in make(lambda shape: values(rng, shape, F32))]
    refused(Case(op, None, None, [], attrs=attrs, constants=constants, outputs=outputs), inputs, match)
    if function is not None:
        assert emulator.aclemu_calls(f"{function}GetWorkspaceSize".encode()) == 0


def test_split_by_num_outputs_refuses_a_count_the_node_does_not_have_aclnn(rng, emulator):
    case = Case("Split", None, None, [], attrs={"axis": 0, "num_outputs": 3}, outputs=2)
    refused(case, [values(rng, [6], F32)], r"attribute 'num_outputs' is 3 but the node has 2 outputs")


def _untyped_constant_of_shape(shape, value):
    """A session running ConstantOfShape into an Identity, its output typed by ORT alone (as a node
    deep in a graph without value_info is), on the NPU."""
    attrs = {} if value is None else {"value": numpy_helper.from_array(value, "value")}
    graph = helper.make_graph(
        [
            helper.make_node("ConstantOfShape", ["shape"], ["filled"], **attrs),
            helper.make_node("Identity", ["filled"], ["y"]),
        ],
        "constant_of_shape",
        [],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(shape, "shape")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)
    return aclnn_emulator.make_session(to_aclnn_domain(model))


@pytest.mark.parametrize(
    "shape, value, match",
    [
        (ints(2, -3), None, r"shape \[2,-3\] has a negative size"),
        # ORT types the output float32 (the row's one kernel: its shape inference cannot read the
        # tensor attribute), so an int64 value is refused, naming its type, not filled as floats:
        # by the kernel, or, where the graph declares the output int64 (the CANN EP's sessions
        # check it), by ONNX Runtime's type check at load. cann_ep moves no such node.
        (
            ints(2, 2),
            np.array([7], np.int64),
            r"(ConstantOfShape: attribute 'value' is int64; the NPU kernel fills float32 only"
            r"|does not match expected type \(tensor\(int64\)\))",
        ),
    ],
    ids=["aclnn-negative-size", "aclnn-int64-value"],
)
def test_constant_of_shape_refuses_before_any_vendor_call(shape, value, match, emulator):
    with pytest.raises(Exception, match=match if match.startswith("(") else r"ConstantOfShape: " + match):
        _untyped_constant_of_shape(shape, value).run({})
    assert emulator.aclemu_calls(b"aclnnInplaceFillScalarGetWorkspaceSize") == 0


# ---- The emulated functions' own checks (first phases called directly): what the vendor's pages
# list for A2/A3, which the kernels above never reach because they refuse first.

ACL_FLOAT, ACL_INT64, ACL_ND = 0, 9, 2
PARAM_NULLPTR, PARAM_INVALID, TILING = 161001, 161002, 561002


class _Acl:
    """The descriptor API and the layout functions, from the libraries the backend loads."""

    def __init__(self):
        lib64 = Path(aclnn_emulator.home()) / "lib64"
        self.base = ctypes.CDLL(str(lib64 / "libnnopbase.so"))
        self.math = ctypes.CDLL(str(lib64 / "libopapi_math.so"))
        self.runtime = aclnn_emulator.control()
        self.runtime.aclGetRecentErrMsg.restype = ctypes.c_char_p
        for name in ("aclCreateTensor", "aclCreateIntArray", "aclCreateScalar", "aclCreateTensorList"):
            getattr(self.base, name).restype = ctypes.c_void_p
        self.base.aclCreateTensor.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p]
        self.base.aclCreateTensor.argtypes += [ctypes.c_int64, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64]
        self.base.aclCreateTensor.argtypes += [ctypes.c_void_p]
        self.base.aclCreateIntArray.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        self.base.aclCreateScalar.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.base.aclCreateTensorList.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
        for name in ("aclDestroyTensor", "aclDestroyIntArray", "aclDestroyScalar", "aclDestroyTensorList"):
            getattr(self.base, name).argtypes = [ctypes.c_void_p]
        self.buffers, self.made = [], []

    @staticmethod
    def _int64s(values):
        return (ctypes.c_int64 * max(len(values), 1))(*values)

    def tensor(self, shape, dtype=ACL_FLOAT):
        data = np.zeros(max(math.prod(shape), 1), np.float64)  # 8 bytes an element: room for any type
        strides = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
        dims, steps = self._int64s(shape), self._int64s(strides)
        self.buffers += [data, dims, steps]
        t = self.base.aclCreateTensor(
            dims, len(shape), dtype, steps, 0, ACL_ND, dims, len(shape), data.ctypes.data
        )
        self.made.append(("aclDestroyTensor", t))
        return ctypes.c_void_p(t)

    def ints(self, *values):
        array = self.base.aclCreateIntArray(self._int64s(values), len(values))
        self.made.append(("aclDestroyIntArray", array))
        return ctypes.c_void_p(array)

    def scalar(self, value):
        cell = ctypes.c_float(value)
        made = self.base.aclCreateScalar(ctypes.byref(cell), ACL_FLOAT)
        self.made.append(("aclDestroyScalar", made))
        return ctypes.c_void_p(made)

    def tensors(self, *shapes):
        items = [self.tensor(s) for s in shapes]
        self.made = [m for m in self.made if m[1] not in {t.value for t in items}]  # the list owns them
        array = (ctypes.c_void_p * len(items))(*[t.value for t in items])
        made = self.base.aclCreateTensorList(array, len(items))
        self.made.append(("aclDestroyTensorList", made))
        return ctypes.c_void_p(made)

    def first_phase(self, function, *args):
        size, executor = ctypes.c_uint64(0), ctypes.c_void_p()
        prepare = getattr(self.math, f"{function}GetWorkspaceSize")
        code = prepare(*args, ctypes.byref(size), ctypes.byref(executor))
        assert not executor.value, f"{function} made an executor for refused arguments"
        return code, self.runtime.aclGetRecentErrMsg().decode()

    def close(self):
        for destroy, made in reversed(self.made):
            getattr(self.base, destroy)(made)


@pytest.fixture
def acl(emulator):
    made = _Acl()
    yield made
    made.close()


EMULATOR_CHECKS = {
    "permute-repeated-dims": (
        lambda a: ("aclnnPermute", a.tensor([2, 3]), a.ints(0, 0), a.tensor([2, 2])),
        PARAM_INVALID,
        r"dims \[0, 0\] repeat an axis",
    ),
    "permute-null-dims": (
        lambda a: ("aclnnPermute", a.tensor([2, 3]), None, a.tensor([3, 2])),
        PARAM_NULLPTR,
        "dims is NULL",
    ),
    "permute-out-shape": (
        lambda a: ("aclnnPermute", a.tensor([2, 3]), a.ints(1, 0), a.tensor([2, 3])),
        TILING,
        r"out shape \[2, 3\] must be \[3, 2\]",
    ),
    "expand-not-broadcast": (
        lambda a: ("aclnnExpand", a.tensor([3, 2]), a.ints(4, 3), a.tensor([4, 3])),
        PARAM_INVALID,
        r"self \[3, 2\] does not broadcast to size \[4, 3\]",
    ),
    "slice-step-0": (
        lambda a: ("aclnnSliceV2", a.tensor([4]), a.ints(0), a.ints(4), a.ints(0), a.ints(0), a.tensor([4])),
        PARAM_INVALID,
        r"steps\[0\] 0 < 1",
    ),
    "cat-shapes": (
        lambda a: ("aclnnCat", a.tensors([2, 3], [3, 1]), ctypes.c_int64(1), a.tensor([2, 4])),
        PARAM_INVALID,
        r"tensors\[1\] \[3, 1\] differs from \[2, 3\] outside dim 1",
    ),
    "flip-axis": (
        lambda a: ("aclnnFlip", a.tensor([2, 3]), a.ints(2), a.tensor([2, 3])),
        PARAM_INVALID,
        r"dims 2 outside \[-2, 1\]",
    ),
    "split-sum": (
        lambda a: ("aclnnSplitWithSize", a.tensor([5]), a.ints(2, 2), ctypes.c_int64(0), a.tensors([2], [2])),
        PARAM_INVALID,
        "splitSize \\[2, 2\\] sums to 4, not self's 5",
    ),
    "pad-odd": (
        lambda a: ("aclnnConstantPadNd", a.tensor([2, 3]), a.ints(1, 1, 1), a.scalar(0), a.tensor([4, 5])),
        PARAM_INVALID,
        "must have an even length",
    ),
    "repeat-short": (
        lambda a: ("aclnnRepeat", a.tensor([2, 3]), a.ints(2), a.tensor([4, 3])),
        PARAM_INVALID,
        "has fewer values than self",
    ),
    "triu-rank-1": (
        lambda a: ("aclnnTriu", a.tensor([4]), ctypes.c_int64(0), a.tensor([4])),
        TILING,
        "self rank 1 outside",
    ),
    "arange-step-0": (
        lambda a: ("aclnnArange", a.scalar(0), a.scalar(3), a.scalar(0), a.tensor([3])),
        PARAM_INVALID,
        "step is 0",
    ),
    "arange-direction": (
        lambda a: ("aclnnArange", a.scalar(3), a.scalar(0), a.scalar(1), a.tensor([3])),
        PARAM_INVALID,
        "do not run in step",
    ),
    "fill-null-value": (
        lambda a: ("aclnnInplaceFillScalar", a.tensor([2]), None),
        PARAM_NULLPTR,
        "value is NULL",
    ),
}


@pytest.mark.parametrize("check_id", sorted(EMULATOR_CHECKS), ids=lambda c: f"aclnn-{c}")
def test_emulated_layout_functions_check_their_arguments_as_the_vendor_pages_say(check_id, acl):
    call, code, match = EMULATOR_CHECKS[check_id]
    function, *args = call(acl)
    got, message = acl.first_phase(function, *args)
    assert got == code, message
    assert re.search(match, message), message
    assert message.startswith(f"{function}GetWorkspaceSize: ")
