"""The options that tune the vision models for a CPU or a GPU worker.

Kept apart from ``inference.py`` and ``handlers.py`` because those import torch (hundreds of
MB per process): a build, its command line and its workers read these options without
importing torch unless a model actually runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

PRECISIONS = ("fp32", "bf16")

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class InferenceOptions:
    """How the vision models run. Command-line flags of ``sciga build``:

    ====================  ===========================  ======================================
    field                 flag                         meaning
    ====================  ===========================  ======================================
    device                ``--device``                 cpu | cuda (cuda falls back to cpu, on
                                                       the worker, when it has no GPU)
    max_batch_size        ``--vision-batch-size``      largest RunInference batch; on a CUDA
                                                       out-of-memory error the model halves it
    min_batch_size        ``--vision-min-batch-size``  smallest RunInference batch
    share_model           ``--vision-share-model``     one model per worker machine, shared by
                                                       its SDK processes
    model_copies          ``--vision-model-copies``    exact copies per machine (one per GPU);
                                                       implies sharing
    precision             ``--vision-precision``       fp32 | bf16 (autocast + channels_last)
    torch_threads         ``--vision-torch-threads``   torch threads per SDK process (default:
                                                       1 on cuda, torch's default on cpu)
    ====================  ===========================  ======================================
    """

    device: str = "cpu"
    max_batch_size: int = 32
    min_batch_size: int = 1
    share_model: bool = False
    model_copies: Optional[int] = None
    precision: str = "fp32"
    torch_threads: Optional[int] = None

    def __post_init__(self):
        if self.device not in DEVICES:
            raise ValueError(f"--device must be cpu or cuda, not {self.device!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"--vision-precision must be fp32 or bf16, not {self.precision!r}")
        if self.min_batch_size < 1 or self.max_batch_size < self.min_batch_size:
            raise ValueError(
                f"--vision-batch-size ({self.max_batch_size}) must be at least "
                f"--vision-min-batch-size ({self.min_batch_size}), and both 1 or more"
            )
        if self.model_copies is not None and self.model_copies < 1:
            raise ValueError("--vision-model-copies must be 1 or more")
        if self.torch_threads is not None and self.torch_threads < 1:
            raise ValueError("--vision-torch-threads must be 1 or more")

    @property
    def shared(self) -> bool:
        """One model per machine shared by its SDK processes (asked for, or implied by copies)."""
        return self.share_model or self.model_copies is not None

    def sdk_torch_threads(self, cuda_available: bool) -> Optional[int]:
        """Torch threads for an SDK process (None: leave torch's default). On a GPU worker
        the CPU side only decodes and copies, and many processes each running one thread
        per core would fight over the cores; on CPU the model wants the cores."""
        if self.torch_threads is not None:
            return self.torch_threads
        return 1 if self.device == "cuda" and cuda_available else None

    def provenance(self) -> dict:
        """What to record in the build manifest's ``options`` (no schema change needed)."""
        return {f"vision_{k}": v for k, v in asdict(self).items()}
