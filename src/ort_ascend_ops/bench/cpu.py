"""The CPU the numbers belong to: its identity, which of the ISA extensions that matter to the
kernels it has, and its cache sizes, from Linux's /proc/cpuinfo and sysfs (None where missing)."""

from __future__ import annotations

import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")  # index*/{level,type,size}

# x86 extensions as /proc/cpuinfo spells them: the kernels use AVX2, FMA and F16C; the others are
# what faster bfloat16/float16 paths would need (a kernel result is only comparable on their like).
ISA_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
)
VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel", "HygonGenuine": "Hygon"}
CACHE_NAMES = {("1", "Data"): "L1d", ("2", "Unified"): "L2", ("3", "Unified"): "L3"}


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def parse_cpuinfo(text: str) -> dict:
    """The first processor's identity and ISA extensions from /proc/cpuinfo's text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() and fields:
            break  # the next processor's block: all of them are one model here
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    vendor = fields.get("vendor_id")
    flags = fields.get("flags")
    return {
        "vendor": None if vendor is None else VENDORS.get(vendor, vendor),
        "family": _int(fields.get("cpu family")),
        "model": _int(fields.get("model")),
        "stepping": _int(fields.get("stepping")),
        "model_name": fields.get("model name"),
        "isa": None if flags is None else [f for f in ISA_FLAGS if f in flags.split()],
    }


def _bytes(size: str) -> int | None:
    """sysfs's "32K" (also M, G, or plain bytes) in bytes."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:].upper(), 1)
    count = _int(size[:-1] if scale > 1 else size)
    return None if count is None else count * scale


def read_caches(root: Path = CACHES) -> dict[str, int | None]:
    """Bytes of cpu0's L1 data, L2 (per core) and L3 (the instance cpu0 shares) caches."""
    sizes: dict[str, int | None] = dict.fromkeys(CACHE_NAMES.values())
    for index in sorted(root.glob("index*")):
        try:
            level, kind, size = ((index / name).read_text().strip() for name in ("level", "type", "size"))
        except OSError:
            continue
        name = CACHE_NAMES.get((level, kind))
        if name is not None:
            sizes[name] = _bytes(size)
    return sizes


def describe(cpuinfo: str | None = None, caches: Path = CACHES) -> dict:
    """The ``cpu`` entry of ``report.machine()``: ``parse_cpuinfo``'s fields, ``cache_bytes`` and
    a ``label`` (model name, family, model, stepping)."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text()
        except OSError:  # not Linux
            cpuinfo = ""
    cpu = parse_cpuinfo(cpuinfo)
    name = cpu["model_name"] or platform.processor() or platform.machine()
    numbers = " ".join(f"{key} {cpu[key]}" for key in ("family", "model", "stepping") if cpu[key] is not None)
    return {"label": f"{name} ({numbers})" if numbers else name, **cpu, "cache_bytes": read_caches(caches)}


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count >= 1 << 20 and count % (1 << 20) == 0 else f"{count >> 10} KiB"


def summary(cpu: dict) -> str:
    """One line: label, ISA extensions present, cache sizes."""
    isa = "ISA unknown" if cpu["isa"] is None else " ".join(cpu["isa"]) or "none of " + "/".join(ISA_FLAGS)
    caches = [f"{name} {_size(n)}" for name, n in cpu["cache_bytes"].items() if n is not None]
    return f"{cpu['label']}; {isa}; " + (", ".join(caches) or "caches unknown")
