"""The GPU a queued job ran on, as its receipt states it: name, driver, clocks, throttling.

Read from NVML through `pynvml` where it is installed, else from `nvidia-smi`, else from torch
(the name only: driver, clocks and reasons unknown). A receipt with less is still a receipt,
so nothing here fails a job: a reader that cannot answer gives way to the next, and None
means no CUDA GPU at all (a CPU worker). `Sampler` reads the facts every SAMPLE_S while a
job's timing runs, because clocks read after it are an idle GPU's: the receipt keeps the last
sample taken during the run and every throttle reason seen in any.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

from grader.periodic import Periodic

SAMPLE_S = 1.0
SMI_TIMEOUT_S = 10.0
SMI_FIELDS = "name,driver_version,clocks.sm,clocks.mem,clocks_throttle_reasons.active"
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""NVML's clock throttle reason bits (nvml.h, `nvmlClocksThrottleReason*`), by the names the
receipt uses."""


def reasons(mask: int) -> list[str]:
    """The throttle reasons a bit mask names, unknown bits as their hex value."""
    named = [name for bit, name in REASONS.items() if mask & bit]
    rest = mask & ~sum(REASONS)
    return named + ([hex(rest)] if rest else [])


def _device_index() -> int:
    """The index NVML and nvidia-smi give the job's GPU: CUDA_VISIBLE_DEVICES' first, else 0."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def from_nvml() -> dict | None:
    """The facts from NVML via pynvml; None where pynvml or the driver cannot answer."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(_device_index())
            name = pynvml.nvmlDeviceGetName(handle)
            return {
                "name": name.decode() if isinstance(name, bytes) else name,
                "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
                "clocks_mhz": {
                    "sm": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                    "mem": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
                },
                "throttle_reasons": reasons(
                    pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
                ),
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no pynvml, no driver, an old one: the next reader answers
        return None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def from_smi() -> dict | None:
    """The facts from `nvidia-smi --query-gpu`; None without it or an answer."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        said = subprocess.run(
            [smi, f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"]
            + ["-i", str(_device_index())],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT_S,
        )
        name, driver, sm, mem, mask = (f.strip() for f in said.stdout.splitlines()[0].split(","))
        return {
            "name": name,
            "driver": driver,
            "clocks_mhz": {"sm": _number(sm), "mem": _number(mem)},
            "throttle_reasons": reasons(int(mask, 16)) if mask.startswith("0x") else [],
        }
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None


def _number(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def from_torch() -> dict | None:
    """The GPU's name from torch, the rest unknown; None without a CUDA device."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        name = torch.cuda.get_device_name(0)
    except Exception:  # torch broken here: no facts rather than a failed job
        return None
    return {"name": name, "driver": None, "clocks_mhz": None, "throttle_reasons": []}


READERS: tuple[Callable[[], dict | None], ...] = (from_nvml, from_smi, from_torch)


def gpu_facts() -> dict | None:
    """The job's GPU as the first reader that answers states it; None on a CPU worker."""
    for reader in READERS:
        if (facts := reader()) is not None:
            return facts
    return None


class Sampler(Periodic):
    """`gpu_facts` every SAMPLE_S in a thread while the block runs: `facts` is the last
    sample, with the throttle reasons of every sample."""

    def __init__(self, every_s: float = SAMPLE_S) -> None:
        super().__init__(every_s, at_start=True)
        self.samples: list[dict] = []

    def tick(self) -> None:
        if (sample := gpu_facts()) is not None:
            self.samples.append(sample)

    @property
    def facts(self) -> dict | None:
        if not self.samples:
            return gpu_facts()
        seen = [r for s in self.samples for r in s["throttle_reasons"]]
        return {**self.samples[-1], "throttle_reasons": list(dict.fromkeys(seen))}
