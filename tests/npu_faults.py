"""The device faults of ``test_training_npu`` in a process of their own (the emulator's injection
and memory size are per process): ``<argv[1]>`` holds the artifacts, ``<argv[2]>`` is the
intra-op thread count. A model past the device's memory, a training step past it (the emulator's
size) and an allocation the runtime refuses in the optimizer step (the emulator's injection) are
errors naming the step, the bytes refused and the device's free bytes; parameters, optimizer
states and the step count are as before, and the same module then steps as if nothing had
happened. Exits 0 when every check holds."""

import sys
from pathlib import Path

import numpy as np
import pytest

from ort_ascend_ops import aclnn_emulator
from ort_ascend_ops.training.api import CheckpointState, Module, Optimizer
from ort_ascend_ops.training.api.device_memory import DeviceMemoryError
from ort_ascend_ops.training.artifacts import artifact_paths


def main(paths: dict, threads: int) -> None:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 256, (2, 16)).astype(np.int64)
    longer = rng.integers(0, 256, (8, 64)).astype(np.int64)
    aclnn_emulator.activate()
    emulator = aclnn_emulator.control()

    def snapshot(state, optimizer):
        return (
            {n: p.data.copy() for n, p in state.parameters.items()},
            optimizer.states(),
            optimizer.step_count,
        )

    def same(a, b):
        params_a, states_a, count_a = a
        params_b, states_b, count_b = b
        assert count_a == count_b
        for name in params_a:
            np.testing.assert_array_equal(params_a[name], params_b[name], err_msg=name)
        for kind in states_a:
            for name in states_a[kind]:
                np.testing.assert_array_equal(states_a[kind][name], states_b[kind][name], err_msg=name)

    def trained(faults: bool):
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
        module = Module(paths["training"], state, device="npu", threads=threads)
        optimizer = Optimizer(paths["optimizer"], module)
        losses = []
        for step in range(2):
            if faults and step == 1:
                before = snapshot(state, optimizer)
                emulator.aclemu_set_device_memory(emulator.aclemu_device_bytes() + 100_000)
                with pytest.raises(
                    DeviceMemoryError,
                    match=r"npu: the training step ran out of device memory: the runtime refused an allocation "
                    r"of [\d,]+ bytes .*; [\d,]+ of [\d,]+ bytes are free now",
                ):
                    module(longer, longer)
                emulator.aclemu_set_device_memory(0)
                same(before, snapshot(state, optimizer))
            losses.append(float(module(ids, ids)))
            if faults and step == 0:
                before = snapshot(state, optimizer)
                emulator.aclemu_fail(b"aclrtMalloc", 207001, None)  # the step's first allocation
                with pytest.raises(
                    DeviceMemoryError, match=r"npu: the optimizer step ran out of device memory"
                ):
                    optimizer.step()
                emulator.aclemu_reset()
                same(before, snapshot(state, optimizer))
            assert optimizer.step()
            module.lazy_reset_grad()
        return losses, snapshot(state, optimizer)

    # A model that does not fit: an error, and the state stays whole on the host.
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    emulator.aclemu_set_device_memory(1 << 20)
    with pytest.raises(
        DeviceMemoryError, match=r"npu: loading the parameters and optimizer states ran out of device memory"
    ):
        Module(paths["training"], state, device="npu", threads=threads)
    emulator.aclemu_set_device_memory(0)
    assert state.memory.device == "cpu"
    assert all(p.value.device_name().lower() == "cpu" for p in state.parameters.values())

    clean_losses, clean = trained(False)
    faulted_losses, faulted = trained(True)
    assert faulted_losses == clean_losses
    same(faulted, clean)


if __name__ == "__main__":
    main(artifact_paths(Path(sys.argv[1])), int(sys.argv[2]))
