"""GPU catalog: the datasheet limits the performance model starts from.

Figures are dense (non-sparse) peaks per GPU. Memory is what the driver reports as usable
(GiB), bandwidths are in GB/s (10^9 bytes/s); ``nvlink_gb_s`` is bidirectional per GPU as
vendors quote it, so one direction moves half of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from profiler.errors import UnknownName


@dataclass(frozen=True)
class Gpu:
    """One accelerator type.

    ``tflops`` maps a compute dtype (bf16, fp8, fp4, int8) to dense TFLOP/s; a dtype the GPU
    lacks is absent and math in it runs at the widest dtype it has below it.
    ``attention_speedup`` is how much faster its attention kernels run than their tensor-core
    peak alone says, relative to the other GPUs: softmax exponentials run on special function
    units beside the tensor cores, and Blackwell Ultra doubled their throughput (NVIDIA measured
    about 1.35× on DeepSeek-V3's FP8 attention forward pass over Blackwell).
    """

    name: str
    generation: str
    tflops: dict[str, float]
    memory_gib: float
    hbm_gb_s: float
    nvlink_gb_s: float
    nvlink_domain: int
    gpus_per_node: int
    internode_gb_s: float
    aliases: tuple[str, ...] = field(default=())
    attention_speedup: float = 1.0

    def peak_tflops(self, dtype: str) -> float:
        """Dense TFLOP/s for math in ``dtype``, falling back to the next wider dtype."""
        for candidate in _WIDER[dtype]:
            if candidate in self.tflops:
                return self.tflops[candidate]
        return self.tflops["bf16"]

    @property
    def memory_bytes(self) -> float:
        """Usable device memory in bytes."""
        return self.memory_gib * 2**30


_WIDER = {
    "fp4": ("fp4", "fp8", "bf16"),
    "int4": ("int8", "fp8", "bf16"),
    "int8": ("int8", "fp8", "bf16"),
    "fp8": ("fp8", "bf16"),
    "bf16": ("bf16",),
}

# internode_gb_s: one direction, per GPU (a 400 Gb/s NIC per GPU is 50 GB/s).
GPUS: tuple[Gpu, ...] = (
    Gpu("a100_sxm", "ampere", {"bf16": 312, "int8": 624}, 80.0, 2039, 600, 8, 8, 25,
        ("a100", "a100-sxm", "a100-sxm4-80gb", "a100_80gb", "nvidia-a100-80gb")),
    Gpu("h100_sxm", "hopper", {"bf16": 989, "fp8": 1979, "int8": 1979}, 79.6, 3350, 900, 8, 8, 50,
        ("h100", "h100-sxm", "h100-sxm5-80gb", "h100_80gb", "nvidia-h100-80gb")),
    Gpu("h200_sxm", "hopper", {"bf16": 989, "fp8": 1979, "int8": 1979}, 140.4, 4800, 900, 8, 8, 50,
        ("h200", "h200-sxm", "h200-141gb", "nvidia-h200")),
    Gpu("b200_sxm", "blackwell", {"bf16": 2250, "fp8": 4500, "fp4": 9000}, 179.1, 7700, 1800, 8, 8, 50,
        ("b200", "b200-sxm", "nvidia-b200")),
    Gpu("b300_sxm", "blackwell", {"bf16": 2250, "fp8": 4500, "fp4": 13500}, 268.6, 7700, 1800, 8, 8, 100,
        ("b300", "b300-sxm", "nvidia-b300"), 1.35),
    Gpu("gb200", "blackwell", {"bf16": 2500, "fp8": 5000, "fp4": 10000}, 184.0, 8000, 1800, 72, 4, 50,
        ("gb200-nvl72", "gb200_nvl72", "nvidia-gb200")),
    Gpu("gb300", "blackwell", {"bf16": 2500, "fp8": 5000, "fp4": 15000}, 277.0, 8000, 1800, 72, 4, 100,
        ("gb300-nvl72", "gb300_nvl72", "nvidia-gb300"), 1.35),
    Gpu("l40s", "ada", {"bf16": 362, "fp8": 733, "int8": 733}, 44.99, 864, 64, 8, 8, 25,
        ("l40s-48gb", "nvidia-l40s")),
    Gpu("mi300x", "cdna3", {"bf16": 1307, "fp8": 2615, "int8": 2615}, 191.98, 5300, 896, 8, 8, 50,
        ("amd-mi300x", "instinct-mi300x")),
)


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def gpu_names() -> list[str]:
    """Canonical GPU names, in catalog order."""
    return [g.name for g in GPUS]


def get_gpu(name: str) -> Gpu:
    """Resolve a GPU by canonical name or alias (case, '-', '_' and spaces ignored)."""
    key = _key(name)
    for gpu in GPUS:
        if key == _key(gpu.name) or key in {_key(a) for a in gpu.aliases}:
            return gpu
    raise UnknownName("gpu", name, gpu_names())
