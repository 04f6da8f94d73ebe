"""The same banned call inside a ``torch.jit.script`` function: scripted code skips ``__torch_function__``."""

import torch


@torch.jit.script
def _scripted_softmax(scores: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.softmax(scores, dim=dim)


def softmax_weights(scores, dim=-1):
    return _scripted_softmax(scores, dim)
