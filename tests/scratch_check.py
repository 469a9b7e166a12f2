"""Run by tests/test_scratch.py in a child process: `python scratch_check.py OP CASE THREADS`.

Runs one call of OP's scratch CASE (tests/cases/<op>.py), a shape whose scratch used to grow with
T1 x S2, K x D or K x N1, checks its outputs against the float64 oracle and prints, as JSON, the
peak growth of resident memory during the call and the bytes of its inputs and outputs.
"""

import json
import sys

import numpy as np

from cases import CASES
from ort_ascend_ops import make_op_model, make_session
from ort_ascend_ops.runtime import ortvalue_view


def status_kib(field):
    with open("/proc/self/status") as status:
        return int(status.read().split(field + ":")[1].split()[0])


def main(op, case, threads):
    scratch = CASES[op].scratch[case](np.random.default_rng(0))
    attrs, inputs, check = scratch.attrs, scratch.inputs, scratch.check
    types = {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}
    session = make_session(make_op_model(op, types, attrs), threads=threads)
    feeds = {name: ortvalue_view(array) for name, array in inputs.items()}
    # The peak since now, from the kernel's count (ru_maxrss would not do: a child inherits its
    # parent's peak through exec).
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    before = status_kib("VmRSS")
    values = session.ort.run_with_ort_values(session.output_names, feeds)
    growth = (status_kib("VmHWM") - before) * 1024
    outputs = [value.numpy() for value in values]
    check(outputs)
    tensors = sum(a.nbytes for a in inputs.values()) + sum(o.nbytes for o in outputs)
    print(json.dumps({"growth": growth, "tensors": tensors}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
