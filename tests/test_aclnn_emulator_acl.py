"""The emulated single-op API the CANN execution provider's own kernels use: tensor descriptions,
data buffers and attributes (libascendcl.so), aclopCompileAndExecute for the op types the provider
sends (libacl_op_compiler.so), and the graph-mode entry points, which refuse (aclmdl*, ge::*)."""

import ctypes

import ml_dtypes
import numpy as np
import pytest

from ort_ascend_ops import aclnn_emulator

INVALID_PARAM, OP_INPUT_NOT_MATCH, OP_OUTPUT_NOT_MATCH, OP_ATTR_NOT_MATCH = 100000, 100021, 100022, 100023
OP_NOT_FOUND, UNSUPPORTED_DATA_TYPE, FORMAT_NOT_MATCH, API_NOT_SUPPORT = 100024, 100026, 100027, 200001
KERNEL_FAILED = 507015
HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2
ND, NC1HWC0 = 2, 3
ACL_TYPES = {
    np.float32: 0,
    np.float16: 1,
    np.int8: 2,
    np.int32: 3,
    np.uint8: 4,
    np.int16: 6,
    np.uint16: 7,
    np.uint32: 8,
    np.int64: 9,
    np.uint64: 10,
    np.float64: 11,
    np.bool_: 12,
    ml_dtypes.bfloat16: 27,
}
P = ctypes.c_void_p


def _declare(lib, name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = restype, list(argtypes)


@pytest.fixture
def acl(emulator):
    lib = emulator
    i64p = ctypes.POINTER(ctypes.c_int64)
    for name, restype, *args in [
        ("aclCreateTensorDesc", P, ctypes.c_int, ctypes.c_int, i64p, ctypes.c_int),
        ("aclDestroyTensorDesc", None, P),
        ("aclGetTensorDescSize", ctypes.c_size_t, P),
        ("aclGetTensorDescNumDims", ctypes.c_size_t, P),
        ("aclGetTensorDescDimV2", ctypes.c_int, P, ctypes.c_size_t, i64p),
        ("aclSetTensorConst", ctypes.c_int, P, P, ctypes.c_size_t),
        ("aclCreateDataBuffer", P, P, ctypes.c_size_t),
        ("aclDestroyDataBuffer", ctypes.c_int, P),
        ("aclGetDataBufferAddr", P, P),
        ("aclDataTypeSize", ctypes.c_size_t, ctypes.c_int),
        ("aclopCreateAttr", P),
        ("aclopDestroyAttr", None, P),
        ("aclopSetAttrBool", ctypes.c_int, P, ctypes.c_char_p, ctypes.c_uint8),
        ("aclopSetAttrInt", ctypes.c_int, P, ctypes.c_char_p, ctypes.c_int64),
        ("aclopSetAttrFloat", ctypes.c_int, P, ctypes.c_char_p, ctypes.c_float),
        ("aclopSetAttrString", ctypes.c_int, P, ctypes.c_char_p, ctypes.c_char_p),
        ("aclopSetAttrListInt", ctypes.c_int, P, ctypes.c_char_p, ctypes.c_int, i64p),
        ("aclrtCreateStream", ctypes.c_int, ctypes.POINTER(P)),
        ("aclrtDestroyStream", ctypes.c_int, P),
        ("aclrtSynchronizeStream", ctypes.c_int, P),
        ("aclrtMalloc", ctypes.c_int, ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int),
        ("aclrtFree", ctypes.c_int, P),
        ("aclrtMemcpy", ctypes.c_int, P, ctypes.c_size_t, P, ctypes.c_size_t, ctypes.c_int),
        ("aclGetRecentErrMsg", ctypes.c_char_p),
    ]:
        _declare(lib, name, restype, *args)
    return lib


@pytest.fixture
def compiler(acl):
    lib = ctypes.CDLL(f"{aclnn_emulator.home()}/lib64/libacl_op_compiler.so")
    _declare(
        lib,
        "aclopCompileAndExecute",
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        P,
        P,
        ctypes.c_int,
        P,
        P,
        P,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_char_p,
        P,
    )
    return lib


def message(acl):
    return (acl.aclGetRecentErrMsg() or b"").decode()


def dims_of(shape):
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


def make_desc(acl, dtype, shape, fmt=ND):
    desc = acl.aclCreateTensorDesc(ACL_TYPES[dtype], len(shape), dims_of(shape), fmt)
    assert desc, message(acl)
    return desc


def test_tensor_desc_round_trips_and_checks(acl):
    desc = make_desc(acl, np.float16, (2, 3, 4))
    assert (acl.aclGetTensorDescSize(desc), acl.aclGetTensorDescNumDims(desc)) == (48, 3)
    dim = ctypes.c_int64()
    assert [acl.aclGetTensorDescDimV2(desc, i, ctypes.byref(dim)) or dim.value for i in range(3)] == [2, 3, 4]
    assert acl.aclGetTensorDescDimV2(desc, 3, ctypes.byref(dim)) == INVALID_PARAM
    assert message(acl) == "aclGetTensorDescDimV2: index 3 outside the desc's 3 dims"
    value = np.zeros((2, 3, 4), np.float16)
    assert acl.aclSetTensorConst(desc, value.ctypes.data, 47) == INVALID_PARAM
    assert "length 47 differs from the 48 bytes" in message(acl)
    assert acl.aclSetTensorConst(desc, value.ctypes.data, 48) == 0
    acl.aclDestroyTensorDesc(desc)
    acl.aclDestroyTensorDesc(desc)
    assert (
        message(acl)
        == "aclDestroyTensorDesc: desc is not a live aclTensorDesc: destroyed twice, or never created"
    )
    assert (acl.aclGetTensorDescSize(desc), acl.aclGetTensorDescNumDims(desc)) == (0, 0)
    scalar = make_desc(acl, np.int64, ())
    assert (acl.aclGetTensorDescSize(scalar), acl.aclGetTensorDescNumDims(scalar)) == (8, 0)
    acl.aclDestroyTensorDesc(scalar)


@pytest.mark.parametrize(
    ("dtype", "shape", "rule"),
    [
        (13, (2,), "dataType 13 is not emulated"),
        (0, (2, -1), "dims[1] = -1: dynamic shapes are not emulated"),
    ],
)
def test_tensor_desc_refusals(acl, dtype, shape, rule):
    assert not acl.aclCreateTensorDesc(dtype, len(shape), dims_of(shape), ND)
    assert message(acl) == f"aclCreateTensorDesc: {rule}"
    assert not acl.aclCreateTensorDesc(0, 2, None, ND)
    assert message(acl) == "aclCreateTensorDesc: dims is NULL but numDims is 2"


def test_injected_failures_create_nothing(acl):
    acl.aclemu_fail(b"aclCreateTensorDesc", INVALID_PARAM, b"injected")
    assert not acl.aclCreateTensorDesc(0, 1, dims_of((4,)), ND)
    assert message(acl) == "injected"
    assert acl.aclemu_calls(b"aclCreateTensorDesc") == 1


def test_data_buffers_and_type_sizes(acl):
    data = np.zeros(4, np.float32)
    buffer = acl.aclCreateDataBuffer(data.ctypes.data, data.nbytes)
    assert acl.aclGetDataBufferAddr(buffer) == data.ctypes.data
    assert acl.aclDestroyDataBuffer(buffer) == 0
    assert acl.aclDestroyDataBuffer(buffer) == INVALID_PARAM
    assert "not a live aclDataBuffer" in message(acl)
    assert not acl.aclGetDataBufferAddr(buffer)
    assert not acl.aclCreateDataBuffer(None, 4)
    assert message(acl) == "aclCreateDataBuffer: data is NULL but size is 4"
    empty = acl.aclCreateDataBuffer(None, 0)
    assert empty and acl.aclDestroyDataBuffer(empty) == 0
    assert {t: acl.aclDataTypeSize(code) for t, code in ACL_TYPES.items()} == {
        t: np.dtype(t).itemsize for t in ACL_TYPES
    }


def test_attrs_take_every_type_and_check_their_arguments(acl):
    attr = acl.aclopCreateAttr()
    values = (ctypes.c_int64 * 2)(3, 4)
    assert acl.aclopSetAttrBool(attr, b"adj_x1", 1) == 0
    assert acl.aclopSetAttrInt(attr, b"axis", -1) == 0
    assert acl.aclopSetAttrFloat(attr, b"epsilon", 1e-5) == 0
    assert acl.aclopSetAttrString(attr, b"data_format", b"NCHW") == 0
    assert acl.aclopSetAttrListInt(attr, b"shape", 2, values) == 0
    assert acl.aclopSetAttrListInt(attr, b"shape", -1, values) == INVALID_PARAM
    assert acl.aclopSetAttrString(attr, b"mode", None) == INVALID_PARAM
    assert message(acl) == "aclopSetAttrString: attrValue is NULL"
    assert acl.aclopSetAttrInt(attr, None, 1) == INVALID_PARAM
    assert message(acl) == "aclopSetAttrInt: attrName is NULL or empty"
    acl.aclopDestroyAttr(attr)
    assert acl.aclopSetAttrInt(attr, b"axis", 1) == INVALID_PARAM
    assert "attr is not a live aclopAttr" in message(acl)


MODEL_CALLS = {  # symbol: (argtypes, what a refusal returns)
    "aclmdlCreateDesc": ([], None),
    "aclmdlDestroyDesc": ([P], API_NOT_SUPPORT),
    "aclmdlGetDesc": ([P, ctypes.c_uint32], API_NOT_SUPPORT),
    "aclmdlGetNumInputs": ([P], 0),
    "aclmdlGetNumOutputs": ([P], 0),
    "aclmdlGetInputSizeByIndex": ([P, ctypes.c_size_t], 0),
    "aclmdlGetOutputSizeByIndex": ([P, ctypes.c_size_t], 0),
    "aclmdlGetOutputDims": ([P, ctypes.c_size_t, P], API_NOT_SUPPORT),
    "aclmdlCreateDataset": ([], None),
    "aclmdlDestroyDataset": ([P], API_NOT_SUPPORT),
    "aclmdlAddDatasetBuffer": ([P, P], API_NOT_SUPPORT),
    "aclmdlGetDatasetBuffer": ([P, ctypes.c_size_t], None),
    "aclmdlGetDatasetTensorDesc": ([P, ctypes.c_size_t], None),
    "aclmdlLoadFromFile": ([ctypes.c_char_p, P], API_NOT_SUPPORT),
    "aclmdlLoadFromMem": ([P, ctypes.c_size_t, P], API_NOT_SUPPORT),
    "aclmdlUnload": ([ctypes.c_uint32], API_NOT_SUPPORT),
    "aclmdlExecute": ([ctypes.c_uint32, P, P], API_NOT_SUPPORT),
    "aclmdlExecuteAsync": ([ctypes.c_uint32, P, P, P], API_NOT_SUPPORT),
}


@pytest.mark.parametrize("symbol", sorted(MODEL_CALLS))
def test_offline_model_calls_refuse(acl, symbol):
    argtypes, refusal = MODEL_CALLS[symbol]
    restype = P if refusal is None else ctypes.c_int if refusal else ctypes.c_size_t
    _declare(acl, symbol, restype, *argtypes)
    assert getattr(acl, symbol)(*[None if t in (P, ctypes.c_char_p) else 0 for t in argtypes]) == refusal
    assert message(acl) == (
        f"{symbol}: offline models (CANN graph mode) are not emulated; "
        "run the CANN execution provider with enable_cann_graph=0"
    )
    assert acl.aclemu_calls(symbol.encode()) == 1


def test_ge_strings_order_and_graph_calls_refuse(acl, capfd):
    ge = ctypes.CDLL(f"{aclnn_emulator.home()}/lib64/libfmk_onnx_parser.so")
    _declare(ge, "_ZN2ge12AscendStringC1EPKc", None, P, ctypes.c_char_p)
    _declare(ge, "_ZNK2ge12AscendStringltERKS0_", ctypes.c_bool, P, P)
    _declare(ge, "_ZN2ge16aclgrphSaveModelEPKcRKNS_15ModelBufferDataE", ctypes.c_uint32, ctypes.c_char_p, P)
    # Each object is one std::shared_ptr (two pointers); these stay alive for the process.
    strings = {name: ctypes.create_string_buffer(16) for name in (b"a", b"b", None)}
    for name, storage in strings.items():
        ge._ZN2ge12AscendStringC1EPKc(ctypes.addressof(storage), name)
    less = ge._ZNK2ge12AscendStringltERKS0_
    assert [less(strings[x], strings[y]) for x, y in [(b"a", b"b"), (b"b", b"a"), (b"a", b"a")]] == [1, 0, 0]
    assert (less(strings[None], strings[b"a"]), less(strings[b"a"], strings[None])) == (1, 0)
    model = ctypes.create_string_buffer(24)  # ModelBufferData: shared_ptr<uint8_t>, uint64_t
    assert ge._ZN2ge16aclgrphSaveModelEPKcRKNS_15ModelBufferDataE(b"/tmp/never", model) == 0xFFFFFFFF
    expected = (
        "ge::aclgrphSaveModel: CANN graph mode (ONNX parsing and graph build) is not emulated; "
        "run the CANN execution provider with enable_cann_graph=0"
    )
    assert message(acl) == expected
    assert expected in capfd.readouterr().err


class Device:
    """Device memory for arrays, a stream, and the descs and buffers of one aclop call."""

    def __init__(self, acl):
        self.acl, self.blocks, self.objects = acl, [], []
        self.stream = P()
        assert acl.aclrtCreateStream(ctypes.byref(self.stream)) == 0

    def put(self, array):
        block = P()
        assert self.acl.aclrtMalloc(ctypes.byref(block), max(array.nbytes, 1), 0) == 0
        self.blocks.append(block)
        array = np.ascontiguousarray(array)
        assert (
            self.acl.aclrtMemcpy(block, max(array.nbytes, 1), array.ctypes.data, array.nbytes, HOST_TO_DEVICE)
            == 0
        )
        return block

    def get(self, block, shape, dtype):
        out = np.zeros(shape, dtype)
        assert self.acl.aclrtMemcpy(out.ctypes.data, out.nbytes, block, out.nbytes, DEVICE_TO_HOST) == 0, (
            message(self.acl)
        )
        return out

    def operands(self, arrays, sizes=None):
        descs = (P * max(len(arrays), 1))()
        buffers = (P * max(len(arrays), 1))()
        blocks = []
        for i, array in enumerate(arrays):
            descs[i] = make_desc(self.acl, array.dtype.type, array.shape)
            blocks.append(self.put(array))
            buffers[i] = self.acl.aclCreateDataBuffer(blocks[-1], array.nbytes if sizes is None else sizes[i])
            self.objects += [descs[i], buffers[i]]
        return descs, buffers, blocks

    def close(self):
        for obj in self.objects:
            self.acl.aclDestroyTensorDesc(obj)  # refuses the buffers, which the next line takes
            self.acl.aclDestroyDataBuffer(obj)
        assert self.acl.aclrtSynchronizeStream(self.stream) == 0
        for block in self.blocks:
            assert self.acl.aclrtFree(block) == 0
        assert self.acl.aclrtDestroyStream(self.stream) == 0


@pytest.fixture
def device(acl):
    d = Device(acl)
    yield d
    d.close()


def make_attr(acl, attrs):
    attr = acl.aclopCreateAttr()
    for name, value in attrs.items():
        if isinstance(value, bool):
            assert acl.aclopSetAttrBool(attr, name.encode(), value) == 0
        elif isinstance(value, int):
            assert acl.aclopSetAttrInt(attr, name.encode(), value) == 0
        elif isinstance(value, float):
            assert acl.aclopSetAttrFloat(attr, name.encode(), value) == 0
        else:
            assert acl.aclopSetAttrListInt(attr, name.encode(), len(value), dims_of(value)) == 0
    return attr


def execute(compiler, device, op, inputs, outputs, attrs=(), sizes=None):
    """Queues `op`; returns the status and the output blocks."""
    in_descs, in_buffers, _ = device.operands(inputs, sizes)
    out_descs, out_buffers, out_blocks = device.operands(outputs)
    attr = make_attr(device.acl, dict(attrs))
    status = compiler.aclopCompileAndExecute(
        op.encode(),
        len(inputs),
        in_descs,
        in_buffers,
        len(outputs),
        out_descs,
        out_buffers,
        attr,
        0,
        0,
        None,
        device.stream,
    )
    device.acl.aclopDestroyAttr(attr)
    return status, out_blocks


def run(compiler, device, op, inputs, out_shape, attrs=()):
    """Runs `op` through the stream and returns its one output."""
    dtype = inputs[0].dtype
    status, (block,) = execute(compiler, device, op, inputs, [np.zeros(out_shape, dtype)], attrs)
    assert status == 0, message(device.acl)
    assert device.acl.aclrtSynchronizeStream(device.stream) == 0, message(device.acl)
    return device.get(block, out_shape, dtype)


FLOATS = [np.float32, np.float16, np.float64]
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64]
TOLERANCE = {np.float32: 1e-6, np.float16: 1e-3, ml_dtypes.bfloat16: 8e-3, np.float64: 1e-15}


def sample(rng, dtype, shape, low=-4, high=4):
    if dtype in INTS:
        info = np.iinfo(dtype)
        return rng.integers(max(low, info.min), min(high, info.max), shape, endpoint=True).astype(dtype)
    return rng.uniform(low, high, shape).astype(dtype)


def check(out, ref, dtype):
    if dtype in INTS:
        np.testing.assert_array_equal(out, ref.astype(dtype))
        return 0.0
    error = np.linalg.norm(out.astype(np.float64) - ref) / np.linalg.norm(ref)
    assert error <= TOLERANCE[dtype]
    return error


ORACLES = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize(
    ("a_shape", "b_shape"), [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (3, 1)), ((1, 4), (3, 1))]
)
def test_binary_ops_broadcast_like_numpy(compiler, device, op, dtype, a_shape, b_shape):
    rng = np.random.default_rng(0)
    a = sample(rng, dtype, a_shape)
    b = sample(rng, dtype, b_shape, 1 if op == "Div" else -4)  # positive divisors for unsigned types too
    out = run(compiler, device, op, [a, b], np.broadcast_shapes(a_shape, b_shape))
    wide = np.int64 if dtype in INTS else np.float64
    if op == "Div" and dtype in INTS:  # ONNX Div truncates
        ref = np.trunc(a.astype(np.float64) / b.astype(np.float64))
    elif op == "Div":
        ref = a.astype(np.float64) / b.astype(np.float64)
    else:
        ref = ORACLES[op](a.astype(wide), b.astype(wide))
    check(out, ref, dtype)


def test_integer_arithmetic_wraps_to_its_width(compiler, device):
    a, b = np.array([120, -128, 100], np.int8), np.array([10, -1, 3], np.int8)
    np.testing.assert_array_equal(run(compiler, device, "Add", [a, b], (3,)), [-126, 127, 103])
    np.testing.assert_array_equal(run(compiler, device, "Mul", [a, b], (3,)), [-80, -128, 44])
    np.testing.assert_array_equal(run(compiler, device, "Div", [a, b], (3,)), [12, -128, 33])


def test_integer_division_by_zero_fails_the_wait(compiler, device):
    status, _ = execute(
        compiler, device, "Div", [np.ones(2, np.int32), np.array([1, 0], np.int32)], [np.zeros(2, np.int32)]
    )
    assert status == 0
    assert device.acl.aclrtSynchronizeStream(device.stream) == KERNEL_FAILED
    assert "integer division by zero" in message(device.acl)


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.uint8], ids=lambda t: np.dtype(t).name)
def test_broadcast_to_d(compiler, device, dtype):
    x = sample(np.random.default_rng(1), dtype, (3, 1))
    out = run(compiler, device, "BroadcastToD", [x], (2, 3, 4), {"shape": (2, 3, 4)})
    np.testing.assert_array_equal(out, np.broadcast_to(x, (2, 3, 4)))


@pytest.mark.parametrize(
    "dtype",
    [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64],
    ids=lambda t: np.dtype(t).name,
)
def test_relu(compiler, device, dtype):
    x = sample(np.random.default_rng(2), dtype, (5, 7))
    check(run(compiler, device, "Relu", [x], x.shape), np.maximum(x.astype(np.float64), 0), dtype)


@pytest.mark.parametrize(("axis", "out_shape"), [(1, (2, 12)), (0, (1, 24)), (3, (24, 1)), (-1, (6, 4))])
def test_flatten(compiler, device, axis, out_shape):
    x = np.arange(24, dtype=np.float16).reshape(2, 3, 4)
    np.testing.assert_array_equal(
        run(compiler, device, "Flatten", [x], out_shape, {"axis": axis}), x.reshape(out_shape)
    )


MATMUL_SHAPES = [
    ((4, 5), (5, 3)),
    ((2, 4, 5), (5, 3)),
    ((2, 1, 4, 5), (3, 5, 6)),
    ((5,), (2, 5, 3)),
    ((2, 4, 5), (5,)),
    ((5,), (5,)),
]


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32], ids=lambda t: np.dtype(t).name
)
@pytest.mark.parametrize(("a_shape", "b_shape"), MATMUL_SHAPES)
def test_batch_matmul_is_onnx_matmul(compiler, device, dtype, a_shape, b_shape):
    rng = np.random.default_rng(3)
    a, b = sample(rng, dtype, a_shape), sample(rng, dtype, b_shape)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = run(compiler, device, "BatchMatMul", [a, b], ref.shape, {"adj_x1": False, "adj_x2": False})
    error = check(out, ref, dtype)
    print(f"BatchMatMul {np.dtype(dtype).name} {a_shape} x {b_shape}: relative error {error:.2e}")


def test_batch_matmul_adjoints_transpose(compiler, device):
    rng = np.random.default_rng(4)
    a, b = sample(rng, np.float32, (2, 5, 4)), sample(rng, np.float32, (3, 5))
    out = run(compiler, device, "BatchMatMul", [a, b], (2, 4, 3), {"adj_x1": True, "adj_x2": True})
    check(out, np.swapaxes(a, -1, -2).astype(np.float64) @ b.T.astype(np.float64), np.float32)


LOG_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64]  # the EP registers float16 and float


@pytest.mark.parametrize("dtype", LOG_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize(
    ("attrs", "oracle"),
    [
        ({"base": -1.0, "scale": 1.0, "shift": 0.0}, np.log),  # what the EP sends
        ({}, np.log),  # CANN's defaults
        ({"base": 2.0, "scale": 0.5, "shift": 1.0}, lambda x: np.log2(0.5 * x + 1)),
    ],
    ids=["ep", "defaults", "base2"],
)
def test_log(compiler, device, dtype, attrs, oracle):
    x = sample(np.random.default_rng(6), dtype, (4, 6), 0.05, 8)
    check(run(compiler, device, "Log", [x], x.shape, attrs), oracle(x.astype(np.float64)), dtype)


def test_log_edges_follow_numpy(compiler, device):
    x = np.array([0.0, -1.0, np.inf, np.nan, 1.0], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(run(compiler, device, "Log", [x], x.shape), np.log(x))


CAST_TYPES = [
    np.bool_,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.float16,
    ml_dtypes.bfloat16,
    np.float32,
    np.float64,
]  # the EP registers all but bfloat16, both ways
UNSIGNED = (np.bool_, np.uint8, np.uint16, np.uint32, np.uint64)


def cast(compiler, device, x, to, attrs=None):
    """Queues a Cast of x to dtype `to` and waits; returns the status, the wait's status, the output."""
    status, (block,) = execute(
        compiler,
        device,
        "Cast",
        [x],
        [np.zeros(x.shape, to)],
        {"dst_type": ACL_TYPES[to]} if attrs is None else attrs,
    )
    waited = device.acl.aclrtSynchronizeStream(device.stream)
    return status, waited, device.get(block, x.shape, to)


@pytest.mark.parametrize("to", CAST_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("src", CAST_TYPES, ids=lambda t: np.dtype(t).name)
def test_cast_is_numpy_astype(compiler, device, src, to):
    rng = np.random.default_rng(7)
    if src is np.bool_:
        x = rng.integers(0, 2, (3, 8)).astype(bool)
    else:  # in every destination's range, with zeros, fractions for float sources, negatives where both are signed
        values = rng.uniform(0 if src in UNSIGNED or to in UNSIGNED else -100, 100, (3, 8))
        values[0, :3] = 0
        x = (values if np.dtype(src).kind == "f" or src is ml_dtypes.bfloat16 else np.trunc(values)).astype(
            src
        )
    status, waited, out = cast(compiler, device, x, to)
    assert (status, waited) == (0, 0), message(device.acl)
    np.testing.assert_array_equal(out.astype(np.float64), x.astype(to).astype(np.float64))


@pytest.mark.parametrize(
    ("values", "src", "to", "expected"),
    [
        # One rounding, not two through float32: 1 + 2^-11 + 2^-40 is just above the float16 tie.
        ([1 + 2**-11 + 2**-40, 65519.0, 65520.0], np.float64, np.float16, [1 + 2**-10, 65504.0, np.inf]),
        ([1 + 2**-8 + 2**-40, -(1 + 2**-8)], np.float64, ml_dtypes.bfloat16, [1 + 2**-7, -1.0]),
        ([2**64 - 1], np.uint64, np.float32, [2.0**64]),
        ([2**53 + 1, -(2**63)], np.int64, np.float64, [2.0**53, -(2.0**63)]),
        ([300, -1, -129], np.int32, np.int8, [44, -1, 127]),  # integers wrap to their width
        ([-1], np.int64, np.uint64, [2**64 - 1]),
        ([2**64 - 1, 2**63], np.uint64, np.int64, [-1, -(2**63)]),
        ([-2.7, 2.7, -0.5, 127.9], np.float32, np.int8, [-2, 2, 0, 127]),  # floats truncate toward zero
        ([0.0, -0.0, np.nan, 0.5, -np.inf], np.float32, np.bool_, [False, False, True, True, True]),
        ([-(2.0**63)], np.float64, np.int64, [-(2**63)]),
    ],
)
def test_cast_rounds_once_and_wraps_integers(compiler, device, values, src, to, expected):
    status, waited, out = cast(compiler, device, np.array(values, src), to)
    assert (status, waited) == (0, 0), message(device.acl)
    np.testing.assert_array_equal(out, np.array(expected, to))


@pytest.mark.parametrize(
    ("value", "src", "to"),
    [
        (np.nan, np.float32, np.int32),
        (128.0, np.float16, np.int8),
        (-1.0, np.float32, np.uint8),
        (2.0**63, np.float64, np.int64),
        (np.inf, np.float64, np.uint64),
    ],
)
def test_cast_refuses_floats_outside_the_integer_range_at_the_wait(compiler, device, value, src, to):
    status, waited, _ = cast(compiler, device, np.array([1.0, value], src), to)
    assert (status, waited) == (0, KERNEL_FAILED)
    assert (
        f"to {np.dtype(to).name.upper()}: NaN, infinities and values outside the destination's range are not "
        "emulated" in message(device.acl)
    )


def test_work_runs_only_at_the_wait(compiler, device):
    a = np.ones(4, np.float32)
    status, (block,) = execute(compiler, device, "Add", [a, a], [np.zeros(4, np.float32)])
    assert status == 0
    assert device.acl.aclrtSynchronizeStream(device.stream) == 0
    np.testing.assert_array_equal(device.get(block, 4, np.float32), 2 * a)


F4 = np.zeros(4, np.float32)


@pytest.mark.parametrize(
    ("op", "inputs", "outputs", "attrs", "code", "rule"),
    [
        ("Softmax", [F4], [F4], {}, OP_NOT_FOUND, "op type Softmax is not emulated"),
        ("Add", [F4], [F4], {}, OP_INPUT_NOT_MATCH, "Add takes 2 inputs, got 1"),
        ("Add", [F4, F4], [F4], {"alpha": 1.0}, OP_ATTR_NOT_MATCH, 'Add has no attribute "alpha"'),
        (
            "Add",
            [F4, F4],
            [np.zeros(3, np.float32)],
            {},
            OP_OUTPUT_NOT_MATCH,
            "output 0 shape [3] must be [4] (the inputs' broadcast shape)",
        ),
        (
            "Add",
            [F4, np.zeros(4, np.float16)],
            [F4],
            {},
            UNSUPPORTED_DATA_TYPE,
            "input 1 dtype FLOAT16 differs from input 0's FLOAT32",
        ),
        (
            "Add",
            [np.zeros(4, bool)] * 2,
            [np.zeros(4, bool)],
            {},
            UNSUPPORTED_DATA_TYPE,
            "input 0 dtype BOOL not supported (INT8, UINT8, INT16, UINT16, INT32, INT64, FLOAT16, FLOAT32, FLOAT64)",
        ),
        (
            "Add",
            [F4, np.zeros(3, np.float32)],
            [F4],
            {},
            OP_INPUT_NOT_MATCH,
            "shapes [4] and [3] do not broadcast",
        ),
        ("BroadcastToD", [F4], [F4], {}, OP_ATTR_NOT_MATCH, 'BroadcastToD needs attribute "shape"'),
        (
            "BroadcastToD",
            [F4],
            [F4],
            {"shape": 4},
            OP_ATTR_NOT_MATCH,
            'BroadcastToD attribute "shape" must be a list of ints',
        ),
        (
            "BatchMatMul",
            [np.zeros((2, 3), np.float32)] * 2,
            [np.zeros((2, 3), np.float32)],
            {},
            OP_INPUT_NOT_MATCH,
            "BatchMatMul inner dims differ: [2, 3] x [2, 3] (adj_x1 0, adj_x2 0)",
        ),
        (
            "Flatten",
            [F4],
            [F4],
            {"axis": 2},
            OP_ATTR_NOT_MATCH,
            'Flatten attribute "axis" 2 outside [-rank, rank] for rank 1',
        ),
        (
            "Log",
            [F4],
            [F4],
            {"base": 1.0},
            OP_ATTR_NOT_MATCH,
            'Log attribute "base" 1.000000 must be -1 (e) or positive and not 1',
        ),
        ("Log", [F4], [F4], {"scale": 2}, OP_ATTR_NOT_MATCH, 'Log attribute "scale" must be a float'),
        (
            "Log",
            [np.zeros(4, np.int32)],
            [np.zeros(4, np.int32)],
            {},
            UNSUPPORTED_DATA_TYPE,
            "input 0 dtype INT32 not supported (FLOAT16, BFLOAT16, FLOAT32, FLOAT64)",
        ),
        (
            "Log",
            [F4],
            [np.zeros(4, np.float16)],
            {},
            UNSUPPORTED_DATA_TYPE,
            "output 0 dtype FLOAT16 differs from input 0's FLOAT32",
        ),
        ("Cast", [F4], [np.zeros(4, np.int32)], {}, OP_ATTR_NOT_MATCH, 'Cast needs attribute "dst_type"'),
        (
            "Cast",
            [F4],
            [np.zeros(4, np.int32)],
            {"dst_type": 9},
            OP_ATTR_NOT_MATCH,
            'Cast attribute "dst_type" 9 differs from output 0\'s dtype INT32 (3)',
        ),
        (
            "Cast",
            [F4],
            [np.zeros(3, np.int32)],
            {"dst_type": 3},
            OP_OUTPUT_NOT_MATCH,
            "output 0 shape [3] must be [4] (input 0's shape)",
        ),
        (
            "Cast",
            [F4],
            [F4],
            {"dst_type": 0, "truncate": True},
            OP_ATTR_NOT_MATCH,
            'Cast has no attribute "truncate"',
        ),
    ],
)
def test_refusals_name_the_rule(compiler, device, op, inputs, outputs, attrs, code, rule):
    status, _ = execute(compiler, device, op, inputs, outputs, attrs)
    assert (status, message(device.acl)) == (code, f"aclopCompileAndExecute: {rule}")


def test_buffers_smaller_than_their_descs_are_refused(compiler, device):
    status, _ = execute(compiler, device, "Relu", [F4], [F4], sizes=[12])
    assert (status, message(device.acl)) == (
        INVALID_PARAM,
        "aclopCompileAndExecute: input 0 buffer holds 12 bytes, its desc [4] FLOAT32 needs 16",
    )


def test_formats_outside_nd_are_refused(acl, compiler, device):
    descs, buffers, _ = device.operands([F4])
    fractal = (P * 1)(make_desc(acl, np.float32, (4,), NC1HWC0))
    device.objects.append(fractal[0])
    status = compiler.aclopCompileAndExecute(
        b"Relu", 1, fractal, buffers, 1, descs, buffers, None, 0, 0, None, device.stream
    )
    assert (status, message(acl)) == (
        FORMAT_NOT_MATCH,
        "aclopCompileAndExecute: input 0 format 3 is not emulated (ND, NCHW, NHWC or NCDHW)",
    )
