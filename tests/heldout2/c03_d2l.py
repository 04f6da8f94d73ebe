# d2l-style masks and dropout
import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    idx = torch.arange(num_tokens, device=device)
    return idx[None, :] > idx[:, None]


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("scores must be square")
    mask = causal_mask(scores.shape[-1], device=scores.device)
    return scores.masked_fill(mask, float("-inf"))


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    keep = ~causal_mask(T, device=weights.device)
    w = weights * keep
    return w / w.sum(dim=-1, keepdim=True)


def dropout_scale(weights, keep_mask, p):
    if not 0 <= p <= 1:
        raise ValueError("p must be in [0, 1]")
    if p == 1:
        return torch.zeros_like(weights)
    return weights * keep_mask / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not 0 <= p <= 1:
        raise ValueError("p must be in [0, 1]")
    if not training or p == 0:
        return weights
    if p == 1:
        return torch.zeros_like(weights)
    mask = (torch.rand(weights.shape, generator=generator, device=weights.device) > p).to(weights.dtype)
    return mask * weights / (1.0 - p)
