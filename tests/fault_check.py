"""Run by tests/test_faults.py in a child process: `python fault_check.py OP THREADS REPEATS`,
THREADS a comma-separated list of intra-op thread counts (one session each, in turn: the child's
start-up, mostly imports, costs more than the checks).

OP's kernel is made to fail allocating inside its parallel tasks (the call of its cases' ``fault``
in tests/cases/<op>.py): once ORT, the session and the inputs are in place, the address space is
capped just above what is mapped plus the outputs (ORT's arena is off, so it allocates them as
they are), below what each task allocates. REPEATS
times, that call must raise ONNX Runtime's error naming the op and the allocation failure, and the
same session must then give the float64 oracle's results on a small valid input. Exits non-zero on
the first mismatch; a crash or a hang is what this guards against. Needs MALLOC_MMAP_THRESHOLD_
set (see test_faults.py).
"""

import resource
import sys

import numpy as np

from cases import CASES
from ort_ascend_ops import make_op_model, make_session, session_options
from ort_ascend_ops.runtime import ortvalue_view

MiB = 1 << 20
# What a call may map beyond what is mapped before it, besides its tasks' scratch: ORT's own
# bookkeeping and the kernel's small buffers. Every case's tasks each allocate twice this or more.
HEADROOM = 8 * MiB


def mapped() -> int:
    with open("/proc/self/status") as status:
        return int(status.read().split("VmSize:")[1].split()[0]) * 1024


def fails_capped(call, room):
    """The exception `call` raises with the address space capped `room` above what is mapped."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped() + room, hard))
    try:
        call()
    except Exception as error:  # noqa: BLE001 - checked by the caller
        return error
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return None


def main(op, threads, repeats):
    fault = CASES[op].fault(np.random.default_rng(0))
    types = {name: (a.dtype, [None] * a.ndim) for name, a in fault.failing.items()}
    feeds = {name: ortvalue_view(array) for name, array in fault.failing.items()}
    options = session_options(threads=threads)
    options.enable_cpu_mem_arena = False
    session = make_session(make_op_model(op, types, fault.attrs), options=options)
    fault.check(session.run(fault.valid))
    for _ in range(repeats):
        error = fails_capped(
            lambda: session.ort.run_with_ort_values(session.output_names, feeds),
            fault.output_bytes + HEADROOM,
        )
        assert error is not None, f"{op} ran with its tasks' scratch out of reach"
        assert type(error).__module__.startswith("onnxruntime"), repr(error)
        assert op in str(error) and "bad_alloc" in str(error), str(error)
        fault.check(session.run(fault.valid))
    print(f"ok: {threads} threads", flush=True)


if __name__ == "__main__":
    for threads in sys.argv[2].split(","):
        main(sys.argv[1], int(threads), int(sys.argv[3]))
    print("ok")
