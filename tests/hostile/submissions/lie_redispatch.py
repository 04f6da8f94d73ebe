"""The softmax kernel called below every mode at once: the operator's ``redispatch`` to the tensor's backend key."""

import torch


def softmax_weights(scores, dim=-1):
    below = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    return torch.ops.aten._softmax.default.redispatch(below, scores, dim, False)
