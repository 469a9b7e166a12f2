"""The gathers and scatters on the NPU (native/aclnn/standard/index.cc) against float64 NumPy
formulas of ONNX's definitions (np.take, take_along_axis, the reference GatherND, np.add.at): every
data type, int32 and int64 indices, indices counted from the end, repeated indices where a scatter
adds, and refusals naming the op and the rule, before the vendor's calls or at its launch."""

import dataclasses
import math

import numpy as np
import pytest
from aclnn_standard import (
    ALL,
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
    run,
    values,
    wide,
)

from ort_ascend_ops import aclnn_emulator


def any_values(rng, shape, dtype):
    """Data of any type, exact in it."""
    return values(rng, shape, dtype, -20, 20)


def indices(rng, shape, size, index_type=I64, from_end=True):
    """Indices into an axis of ``size``, a fair share counted from the end."""
    low = -size if from_end else 0
    return rng.integers(low, size, shape).astype(index_type)


# ---- Gather: y = np.take(data, indices, axis) (ONNX's definition, negatives from the end).


def gather_case(data_shape, index_shape, axis, index_type=I64, dtypes=ALL, id=""):
    size = data_shape[axis]
    return Case(
        "Gather",
        lambda rng, t: [any_values(rng, data_shape, t), indices(rng, index_shape, size, index_type)],
        lambda data, idx: np.take(*wide(data), idx, axis=axis),
        ["aclnnGatherV2"],
        attrs={"axis": axis},
        dtypes=dtypes,
        id=id,
    )


GATHER = [
    gather_case([10, 6], [2, 3], 0, id="embedding-lookup"),
    gather_case([10, 6], [2, 3], 0, I32, dtypes=FLOATS, id="int32-indices"),
    gather_case([3, 5, 4], [2, 2], -2, dtypes=NUMBERS, id="negative-axis"),
    gather_case([3, 5, 4], [], 2, dtypes=NUMBERS, id="scalar-index"),
    gather_case([7], [3, 1, 2], 0, dtypes=(F32, I64), id="vector-data"),
    dataclasses.replace(gather_case([4, 3], [0, 2], 1, dtypes=(F32,), id="empty-indices"), aclnn=[]),
]


# ---- GatherElements: y[i][j] = data[indices[i][j]][j] (axis 0), indices no longer than data.


def along_axis(data, idx, axis):
    cut = tuple(slice(None) if d == axis % data.ndim else slice(0, n) for d, n in enumerate(idx.shape))
    return np.take_along_axis(data[cut], idx.astype(np.int64), axis=axis)


def gather_elements_case(data_shape, index_shape, axis, index_type=I64, dtypes=ALL, id=""):
    size = data_shape[axis]
    return Case(
        "GatherElements",
        lambda rng, t: [any_values(rng, data_shape, t), indices(rng, index_shape, size, index_type)],
        lambda data, idx: along_axis(*wide(data), idx, axis),
        ["aclnnGather", "aclnnLtTensor", "aclnnAdd"],
        attrs={"axis": axis},
        dtypes=dtypes,
        id=id,
    )


GATHER_ELEMENTS = [
    gather_elements_case([3, 4], [5, 4], 0, id="longer-along-axis"),
    gather_elements_case([3, 4, 5], [2, 3, 4], -1, I32, dtypes=NUMBERS, id="int32-negative-axis"),
    gather_elements_case([6], [9], 0, dtypes=(F32, I64), id="vector"),
]


# ---- GatherND (ONNX's reference implementation, batch_dims included).


def gather_nd_reference(data, idx, batch_dims):
    batches = math.prod(idx.shape[:batch_dims])
    out_shape = idx.shape[:-1] + data.shape[batch_dims + idx.shape[-1] :]
    data_b = data.reshape((batches, *data.shape[batch_dims:]))
    idx_b = idx.reshape((batches, -1, idx.shape[-1]))
    slices = [data_b[b][tuple(idx_b[b][i])] for b in range(batches) for i in range(idx_b.shape[1])]
    return np.asarray(slices).reshape(out_shape)


def gather_nd_case(data_shape, index_shape, batch_dims=0, dtypes=ALL, id=""):
    def make(rng, t):
        k = index_shape[-1]
        sizes = np.array(data_shape[batch_dims : batch_dims + k])
        idx = rng.integers(-sizes, sizes, (*index_shape[:-1], k)).astype(np.int64)
        return [any_values(rng, data_shape, t), idx]

    return Case(
        "GatherND",
        make,
        lambda data, idx: gather_nd_reference(*wide(data), idx, batch_dims),
        ["aclnnGatherNd"],
        attrs={"batch_dims": batch_dims} if batch_dims else {},
        dtypes=dtypes,
        id=id,
    )


GATHER_ND = [
    gather_nd_case([2, 3, 4], [5, 2], id="slices"),
    gather_nd_case([2, 3, 4], [2, 2, 3], dtypes=NUMBERS, id="elements"),
    gather_nd_case([2, 3, 4], [2, 4, 1], 1, dtypes=NUMBERS, id="batch-dims-1"),
    gather_nd_case([2, 2, 3, 4], [2, 2, 2], 2, dtypes=(F32, I64), id="batch-dims-2"),
]


# ---- ScatterElements: out = copy(data); out[indices[i][j]][j] (op)= updates[i][j] (axis 0).


def scatter_elements_reference(data, idx, updates, axis, reduction):
    out = data.copy()
    for position in np.ndindex(idx.shape):
        target = list(position)
        target[axis] = idx[position]
        target = tuple(target)
        if reduction == "add":
            out[target] = out[target] + updates[position]
        elif reduction == "mul":
            out[target] = out[target] * updates[position]
        else:
            out[target] = updates[position]
    return out


def distinct_along(rng, shape, size, axis, index_type):
    """Indices without repeats along ``axis`` (ONNX leaves a replacing scatter with repeats undefined)."""
    moved = [shape[axis], *(n for d, n in enumerate(shape) if d != axis)]
    draws = np.stack([rng.permutation(size)[: shape[axis]] for _ in range(math.prod(moved[1:]))], axis=-1)
    idx = np.moveaxis(draws.reshape(moved), 0, axis)
    return np.where(rng.random(shape) < 0.5, idx - size, idx).astype(index_type)


def scatter_elements_case(data_shape, index_shape, axis, reduction="none", index_type=I64, dtypes=ALL, id=""):
    size = data_shape[axis]

    def make(rng, t):
        if reduction == "none":
            idx = distinct_along(rng, index_shape, size, axis % len(data_shape), index_type)
        else:
            idx = indices(rng, index_shape, size, index_type)
        updates = (
            floats(rng, index_shape, t, 0.5, 1.5)
            if reduction == "mul" and t in FLOATS
            else any_values(rng, index_shape, t)
        )
        return [any_values(rng, data_shape, t), idx, updates]

    def oracle(data, idx, updates):
        data, updates = wide(data, updates)
        return scatter_elements_reference(data, idx, updates, axis % data.ndim, reduction)

    return Case(
        "ScatterElements",
        make,
        oracle,
        ["aclnnScatter", "aclnnLtTensor", "aclnnAdd"],
        attrs={"axis": axis, **({"reduction": reduction} if reduction != "none" else {})},
        dtypes=dtypes,
        id=id,
    )


SCATTER_ELEMENTS = [
    scatter_elements_case([5, 4], [3, 4], 0, id="replace"),
    scatter_elements_case(
        [4, 5, 3], [4, 3, 2], -1, index_type=I32, dtypes=NUMBERS, id="replace-int32-last-axis"
    ),
    # The gradient of Gather: repeated indices sum.
    scatter_elements_case([5, 3], [12, 3], 0, "add", dtypes=NUMBERS, id="add-repeated"),
    scatter_elements_case([3, 6], [3, 9], 1, "mul", dtypes=NUMBERS, id="mul-repeated"),
]


# ---- ScatterND: out = copy(data); out[indices[idx]] (op)= updates[idx] for each tuple.


def scatter_nd_reference(data, idx, updates, reduction):
    out = data.copy()
    for position in np.ndindex(idx.shape[:-1]):
        target = tuple(idx[position])
        out[target] = out[target] + updates[position] if reduction == "add" else updates[position]
    return out


def scatter_nd_case(data_shape, index_shape, reduction="none", dtypes=ALL, id=""):
    k = index_shape[-1]
    tuples = math.prod(index_shape[:-1])
    sizes = data_shape[:k]

    def make(rng, t):
        if reduction == "none":  # distinct tuples, half of their coordinates counted from the end
            flat = rng.choice(math.prod(sizes), tuples, replace=False)
            idx = np.stack(np.unravel_index(flat, sizes), axis=-1)
            idx = np.where(rng.random(idx.shape) < 0.5, idx - np.array(sizes), idx)
        else:
            idx = rng.integers(-np.array(sizes), np.array(sizes), (tuples, k))
        updates_shape = [*index_shape[:-1], *data_shape[k:]]
        return [
            any_values(rng, data_shape, t),
            idx.reshape(index_shape).astype(np.int64),
            any_values(rng, updates_shape, t),
        ]

    def oracle(data, idx, updates):
        data, updates = wide(data, updates)
        return scatter_nd_reference(data, idx, updates, reduction)

    return Case(
        "ScatterND",
        make,
        oracle,
        ["aclnnIndexPutImpl"],
        attrs={"reduction": reduction} if reduction != "none" else {},
        dtypes=dtypes,
        id=id,
    )


SCATTER_ND = [
    scatter_nd_case([4, 5, 6], [3, 2], id="slices"),
    scatter_nd_case([3, 4], [2, 3, 2], dtypes=NUMBERS, id="elements"),
    scatter_nd_case([3, 4], [2], dtypes=(F32, I64), id="one-tuple"),
    scatter_nd_case([6, 4], [10, 1], "add", dtypes=NUMBERS, id="add-repeated"),
]


@pytest.mark.parametrize(
    "case, dtype", params([*GATHER, *GATHER_ELEMENTS, *GATHER_ND, *SCATTER_ELEMENTS, *SCATTER_ND])
)
def test_index_ops_give_onnxs_results_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)


def test_embedding_gradient_sums_repeated_rows_aclnn(rng, emulator):
    """Gather's gradient: ScatterElements adding many updates into few rows (float32, within
    tolerance whatever the order of the sums)."""
    rows, width, lookups = 4, 8, 64
    case = Case(
        "ScatterElements",
        lambda r, t: [
            np.zeros((rows, width), t),
            np.repeat(r.integers(-rows, rows, (lookups, 1)), width, axis=1).astype(np.int64),
            floats(r, (lookups, width), t),
        ],
        lambda data, idx, updates: scatter_elements_reference(*wide(data), idx, *wide(updates), 0, "add"),
        ["aclnnScatter"],
        attrs={"axis": 0, "reduction": "add"},
        tolerance=1e-4,
    )
    check(case, F32, rng, emulator)


# ---- Refusals: by the kernel before any vendor call, and by the vendor's launch for an index out
# of range (the device reads the indices: the host never does).


def launch_fails(case, inputs, match):
    """The vendor's launch fails on an index out of range. The CPU test build waits for each
    kernel, so its error names the op, the function and the index; under the CANN EP the stream
    fails at ONNX Runtime's next wait, with the runtime's code alone."""
    if aclnn_emulator.through_cann_ep():
        with pytest.raises(Exception, match="507015"):
            run(case, inputs)
    else:
        refused(case, inputs, match)


def test_gather_axis_out_of_range_is_refused_aclnn(rng, emulator):
    case = dataclasses.replace(gather_case([3, 4], [2], 0), attrs={"axis": 2})
    refused(case, case.make(rng, F32), r"axis 2 is outside \[-2, 1\]")
    assert emulator.aclemu_calls(b"aclnnGatherV2GetWorkspaceSize") == 0


def test_gather_index_out_of_range_fails_the_launch_aclnn(rng, emulator):
    case = gather_case([5, 2], [3], 0)
    data, idx = case.make(rng, F32)
    idx[1] = 5
    launch_fails(case, [data, idx], r"aclnnGatherV2 failed on the device.*index holds 5, outside \[-5, 4\]")


def test_gather_elements_rank_mismatch_is_refused_aclnn(rng, emulator):
    case = GATHER_ELEMENTS[0]
    data = any_values(rng, [3, 4], F32)
    refused(
        case,
        [data, indices(rng, [4], 3)],
        r"input 'indices' \[4\] must have the rank of input 'data' \[3,4\]",
    )
    assert emulator.aclemu_calls(b"aclnnGatherGetWorkspaceSize") == 0


def test_gather_elements_index_below_minus_size_fails_the_launch_aclnn(rng, emulator):
    case = GATHER_ELEMENTS[0]
    data, idx = case.make(rng, F32)
    idx[0, 0] = -4  # one past -3 stays negative once moved: aclnnGather's range check catches it
    launch_fails(case, [data, idx], r"aclnnGather failed on the device.*index holds -1, outside \[0, 2\]")


def test_gather_nd_batch_dims_out_of_range_is_refused_aclnn(rng, emulator):
    case = GATHER_ND[0]
    case = dataclasses.replace(case, attrs={"batch_dims": 2})
    refused(case, case.make(rng, F32), r"batch_dims 2 is outside \[0, 2\)")
    assert emulator.aclemu_calls(b"aclnnGatherNdGetWorkspaceSize") == 0


def test_gather_nd_index_out_of_range_fails_the_launch_aclnn(rng, emulator):
    case = GATHER_ND[0]
    data, idx = case.make(rng, F32)
    idx[2, 1] = -4
    launch_fails(
        case, [data, idx], r"aclnnGatherNd failed on the device.*indices holds -4, outside \[-3, 2\]"
    )


@pytest.mark.parametrize("reduction", ["max", "min"])
def test_scatter_elements_max_and_min_are_refused_by_name_aclnn(reduction, rng, emulator):
    case = SCATTER_ELEMENTS[0]
    case = dataclasses.replace(case, attrs={"axis": 0, "reduction": reduction})
    refused(case, case.make(rng, F32), rf"reduction '{reduction}' has no aclnnScatter mode")
    assert emulator.aclemu_calls(b"aclnnScatterGetWorkspaceSize") == 0


def test_scatter_elements_index_out_of_range_fails_the_launch_aclnn(rng, emulator):
    case = SCATTER_ELEMENTS[0]
    data, idx, updates = case.make(rng, F32)
    idx[1, 2] = 5
    launch_fails(
        case, [data, idx, updates], r"aclnnScatter failed on the device.*index holds 5, outside \[0, 4\]"
    )


@pytest.mark.parametrize("reduction", ["mul", "max", "min"])
def test_scatter_nd_reductions_past_add_are_refused_by_name_aclnn(reduction, rng, emulator):
    case = SCATTER_ND[0]
    case = dataclasses.replace(case, attrs={"reduction": reduction})
    refused(case, case.make(rng, F32), rf"reduction '{reduction}' has no aclnnIndexPutImpl mode")
    assert emulator.aclemu_calls(b"aclnnIndexPutImplGetWorkspaceSize") == 0


def test_scatter_nd_updates_of_the_wrong_shape_are_refused_aclnn(rng, emulator):
    case = SCATTER_ND[0]
    data, idx, updates = case.make(rng, F32)
    refused(case, [data, idx, updates[:, :5]], r"input 'updates' \[3,5\] must be \[3,6\]")


def test_scatter_nd_index_out_of_range_fails_the_launch_aclnn(rng, emulator):
    case = SCATTER_ND[0]
    data, idx, updates = case.make(rng, F32)
    idx[0, 1] = 5
    launch_fails(
        case,
        [data, idx, updates],
        r"aclnnIndexPutImpl failed on the device.*indices holds 5, outside \[-5, 4\]",
    )
