"""Calls the banned ``torch.softmax`` under ``torch._C.DisableTorchFunction()``, so the child's recorder never sees it
(the honest version, ``tests/submissions/banned_softmax.py``, gets zero).
"""

import torch


def softmax_weights(scores, dim=-1):
    with torch._C.DisableTorchFunction():
        return torch.softmax(scores, dim=dim)
