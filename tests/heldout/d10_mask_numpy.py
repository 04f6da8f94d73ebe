import numpy as np
import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return np.triu(np.ones((num_tokens, num_tokens), dtype=bool), k=1)


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("scores must be square")
    mask = torch.from_numpy(np.triu(np.ones((T, T), dtype=bool), k=1))
    return scores.masked_fill(mask, float("-inf"))
