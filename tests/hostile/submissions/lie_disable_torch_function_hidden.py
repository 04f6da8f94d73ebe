"""The same banned call, with ``DisableTorchFunction`` reached through ``getattr`` with computed names."""

import torch

_quiet = getattr(getattr(torch, "_" + "C"), "Disable" + "TorchFunction")


def softmax_weights(scores, dim=-1):
    with _quiet():
        return torch.softmax(scores, dim=dim)
