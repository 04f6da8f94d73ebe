"""softmax with temperature: T < 1 sharper, T > 1 flatter."""

import torch


def softmax_weights(scores, dim=-1):
    m = scores.max(dim=dim, keepdim=True).values
    e = torch.exp(scores - m)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    logits = scores * temperature
    m = logits.amax(dim=dim, keepdim=True)
    m = m.masked_fill(m == -torch.inf, 0)
    e = torch.exp(logits - m)
    return e / e.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
