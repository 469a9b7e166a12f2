"""The CPU description every bench output carries."""

from ort_ascend_ops.bench import cpu, report

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
cache size\t: 107520 KB
flags\t\t: fpu sse2 avx avx2 fma f16c avx512f avx512bw avx512vl avx512_bf16 avx512_fp16 amx_bf16 amx_tile

processor\t: 1
vendor_id\t: GenuineIntel
flags\t\t: fpu sse2
"""


def test_cpu_fields_come_from_cpuinfo_and_sysfs(tmp_path):
    for index, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "107520K")]
    ):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (folder / name).write_text(f"{value}\n")
    described = cpu.describe(CPUINFO, tmp_path)
    assert described == {
        "label": "Intel(R) Xeon(R) Platinum 8480+ (family 6 model 143 stepping 8)",
        "vendor": "Intel",
        "family": 6,
        "model": 143,
        "stepping": 8,
        "model_name": "Intel(R) Xeon(R) Platinum 8480+",
        # The first processor's flags, in ISA_FLAGS' order.
        "isa": [
            "avx",
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512_bf16",
            "avx512_fp16",
            "amx_tile",
            "amx_bf16",
        ],
        "cache_bytes": {"L1d": 48 << 10, "L2": 2 << 20, "L3": 105 << 20},
    }
    assert cpu.summary(described).endswith("amx_bf16; L1d 48 KiB, L2 2 MiB, L3 105 MiB")


def test_cpu_fields_are_none_without_proc_and_sys(tmp_path):
    described = cpu.describe("", tmp_path / "absent")
    assert described["label"]  # platform's processor or machine name
    assert {k: v for k, v in described.items() if k != "label"} == {
        "vendor": None,
        "family": None,
        "model": None,
        "stepping": None,
        "model_name": None,
        "isa": None,
        "cache_bytes": {"L1d": None, "L2": None, "L3": None},
    }
    assert cpu.summary(described).endswith("; ISA unknown; caches unknown")


def test_machine_describes_the_cpu():
    described = report.machine()["cpu"]
    fields = {"label", "vendor", "family", "model", "stepping", "model_name", "isa", "cache_bytes"}
    assert described["label"] and set(described) == fields
    assert set(described["cache_bytes"]) == {"L1d", "L2", "L3"}
