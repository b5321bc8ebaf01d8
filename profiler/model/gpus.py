"""GPU catalog: the datasheet limits the performance model starts from.

Figures are dense (non-sparse) peaks per GPU. Memory is what the driver reports as usable
(GiB), bandwidths are in GB/s (10^9 bytes/s); ``nvlink_gb_s`` is bidirectional per GPU as
vendors quote it, so one direction moves half of it.
"""

import re
from functools import cache
from typing import NamedTuple

from profiler.model.errors import UnknownName


class Gpu(NamedTuple):
    """One accelerator type.

    ``tflops`` maps a compute dtype (bf16, fp8, fp4, int8) to dense TFLOP/s; a dtype the GPU
    lacks is absent and math in it runs at the widest dtype it has below it.
    ``attention_speedup`` is how much faster its attention kernels run than their tensor-core
    peak alone says, relative to the other GPUs: softmax exponentials run on special function
    units beside the tensor cores, and Blackwell Ultra doubled their throughput (NVIDIA measured
    about 1.35× on DeepSeek-V3's FP8 attention forward pass over Blackwell).
    ``switch_allreduce_eff`` is the share of one direction of NVLink that a large all-reduce
    reaches when the NVSwitch reduces (NVLS: each GPU sends and receives the message once), where
    it was measured (0: not measured, the ring model with the fitted link efficiency applies).
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
    aliases: tuple[str, ...] = ()
    attention_speedup: float = 1.0
    switch_allreduce_eff: float = 0.0

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

    @property
    def vendor(self) -> str:
        """``amd`` for Instinct (CDNA) parts, else ``nvidia``."""
        return "amd" if self.generation.startswith("cdna") else "nvidia"


# Backends that run on one vendor's GPUs only (TensorRT-LLM is CUDA-only).
BACKEND_VENDORS = {"trtllm": ("nvidia",)}


def runs_on(backend: str, gpu: Gpu) -> bool:
    """Whether ``backend`` runs on ``gpu`` (vLLM and SGLang run on NVIDIA and AMD GPUs)."""
    return gpu.vendor in BACKEND_VENDORS.get(backend, ("nvidia", "amd"))


def backend_mismatch(backend: str, gpu: Gpu) -> str | None:
    """Why ``backend`` cannot serve on ``gpu``, or None when it can."""
    if runs_on(backend, gpu):
        return None
    return f"{backend} does not run on {gpu.name} ({gpu.vendor.upper()} GPU); use vllm or sglang"


# The dtype whose peak math in a given dtype runs at where the GPU lacks it. 4-bit weights
# on GPUs without FP4 tensor cores run as mixed-input GEMMs that widen them to bf16 in the
# kernel (Marlin, Triton MoE), not as fp8 math.
_WIDER = {
    "fp4": ("fp4", "bf16"),
    "int4": ("int8", "fp8", "bf16"),
    "int8": ("int8", "fp8", "bf16"),
    "fp8": ("fp8", "bf16"),
    "bf16": ("bf16",),
}

# internode_gb_s: one direction, per GPU (a 400 Gb/s NIC per GPU is 50 GB/s).
# HOPPER_SWITCH_ALLREDUCE: an 8-GPU all-reduce of 128 MB in 0.338 ms on DGX H100 (the NCCL measurements
# beside the calibration data), 379 GB/s of message each way: 0.84 of the 450 GB/s link. HGX Hopper
# boards share that NVSwitch generation; other GPUs have no such measurement here.
HOPPER_SWITCH_ALLREDUCE = 0.84
GPUS: tuple[Gpu, ...] = (
    Gpu("a100_sxm", "ampere", {"bf16": 312, "int8": 624}, 80.0, 2039, 600, 8, 8, 25,
        ("a100", "a100-sxm", "a100-sxm4-80gb", "a100_80gb", "nvidia-a100-80gb")),
    Gpu("h100_sxm", "hopper", {"bf16": 989, "fp8": 1979, "int8": 1979}, 79.6, 3350, 900, 8, 8, 50,
        ("h100", "h100-sxm", "h100-sxm5-80gb", "h100_80gb", "nvidia-h100-80gb"),
        switch_allreduce_eff=HOPPER_SWITCH_ALLREDUCE),
    Gpu("h800_sxm", "hopper", {"bf16": 989, "fp8": 1979, "int8": 1979}, 79.6, 3350, 400, 8, 8, 50,
        ("h800", "h800-sxm", "nvidia-h800"), switch_allreduce_eff=HOPPER_SWITCH_ALLREDUCE),  # H100 with NVLink cut to 400 GB/s
    Gpu("h20_sxm", "hopper", {"bf16": 148, "fp8": 296, "int8": 296}, 95.58, 4000, 900, 8, 8, 50,
        ("h20", "h20-sxm", "nvidia-h20"), switch_allreduce_eff=HOPPER_SWITCH_ALLREDUCE),
    Gpu("h200_sxm", "hopper", {"bf16": 989, "fp8": 1979, "int8": 1979}, 140.4, 4800, 900, 8, 8, 50,
        ("h200", "h200-sxm", "h200-141gb", "nvidia-h200"),
        switch_allreduce_eff=HOPPER_SWITCH_ALLREDUCE),
    Gpu("b200_sxm", "blackwell", {"bf16": 2250, "fp8": 4500, "fp4": 9000}, 179.1, 7700, 1800, 8, 8, 50,
        ("b200", "b200-sxm", "nvidia-b200")),
    Gpu("b300_sxm", "blackwell", {"bf16": 2250, "fp8": 4500, "fp4": 13500}, 268.6, 7700, 1800, 8, 8, 100,
        ("b300", "b300-sxm", "nvidia-b300"), 1.35),
    Gpu("gb200", "blackwell", {"bf16": 2500, "fp8": 5000, "fp4": 10000}, 184.0, 8000, 1800, 72, 4, 50,
        ("gb200-nvl72", "gb200_nvl72", "gb200_sxm", "nvidia-gb200")),
    Gpu("gb300", "blackwell", {"bf16": 2500, "fp8": 5000, "fp4": 15000}, 277.0, 8000, 1800, 72, 4, 100,
        ("gb300-nvl72", "gb300_nvl72", "gb300_sxm", "nvidia-gb300"), 1.35),
    # RTX PRO 6000 Blackwell Server Edition: GDDR7, PCIe Gen5 x16 only (no NVLink); Tensor Core
    # peaks at the 2430 MHz its SM clock reaches in servers.
    Gpu("rtx_pro_6000", "blackwell", {"bf16": 468, "fp8": 936, "fp4": 1871}, 95.59, 1792, 128, 8, 8, 50,
        ("rtx_pro_6000_server", "rtx-pro-6000", "rtxpro6000", "rtxpro6000_blackwell_server",
         "rtx-pro-6000-blackwell", "nvidia-rtx-pro-6000")),
    Gpu("l40s", "ada", {"bf16": 362, "fp8": 733, "int8": 733}, 44.99, 864, 64, 8, 8, 25,
        ("l40s-48gb", "nvidia-l40s")),
    Gpu("mi300x", "cdna3", {"bf16": 1307, "fp8": 2615, "int8": 2615}, 191.98, 5300, 896, 8, 8, 50,
        ("amd-mi300x", "instinct-mi300x")),
    Gpu("mi325x", "cdna3", {"bf16": 1307, "fp8": 2615, "int8": 2615}, 255.98, 6000, 896, 8, 8, 50,
        ("amd-mi325x", "instinct-mi325x")),
    Gpu("mi350x", "cdna4", {"bf16": 2307, "fp8": 4614, "fp4": 9228}, 287.98, 8000, 1075, 8, 8, 50,
        ("amd-mi350x", "instinct-mi350x")),
    Gpu("mi355x", "cdna4", {"bf16": 2516, "fp8": 5033, "fp4": 10066}, 287.98, 8000, 1075, 8, 8, 50,
        ("amd-mi355x", "instinct-mi355x")),
)


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def gpu_names() -> list[str]:
    """Canonical GPU names, in catalog order."""
    return [g.name for g in GPUS]


@cache
def _by_key() -> dict[str, Gpu]:
    """Each GPU by the key of its name and of each alias (the catalog's first GPU a key names)."""
    index: dict[str, Gpu] = {}
    for gpu in GPUS:
        for name in (gpu.name, *gpu.aliases):
            index.setdefault(_key(name), gpu)
    return index


def get_gpu(name: str) -> Gpu:
    """Resolve a GPU by canonical name or alias (case, '-', '_' and spaces ignored)."""
    gpu = _by_key().get(_key(name))
    if gpu is None:
        raise UnknownName("gpu", name, gpu_names())
    return gpu
