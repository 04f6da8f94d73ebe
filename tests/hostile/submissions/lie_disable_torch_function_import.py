"""The same banned call, with ``DisableTorchFunction`` imported through ``__import__`` under another name."""

import torch

_hush = __import__("torch._C", fromlist=["DisableTorchFunction"]).DisableTorchFunction


def softmax_weights(scores, dim=-1):
    with _hush():
        return torch.softmax(scores, dim=dim)
