"""What the aclnn backend's tests share: running an op against the host emulator, and checking that
a refused call was refused by the backend itself, before any vendor function ran."""

import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument

from engines import run


def host_waits(emulator):
    """Times our library waited for a stream (the CANN execution provider's own per-run wait
    aside)."""
    return emulator.aclemu_calls_from(b"aclrtSynchronizeStream", b"libort_ascend_ops")


def assert_refused(emulator, op_name, inputs, attrs, match, *, error=InvalidArgument, raw_outputs=None):
    """The backend refuses the call with an error naming the op and `match`, and no aclnn
    function ran."""
    with pytest.raises(error, match=match) as raised:
        run("aclnn", op_name, inputs, attrs, raw=raw_outputs)
    assert op_name in str(raised.value)
    assert emulator.aclemu_calls(f"aclnn{op_name}GetWorkspaceSize".encode()) == 0
    assert emulator.aclemu_calls(f"aclnn{op_name}".encode()) == 0


__all__ = ["Fail", "InvalidArgument", "assert_refused", "host_waits"]
