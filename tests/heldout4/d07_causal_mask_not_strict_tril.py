import math

import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError(f"num_tokens={num_tokens}")
    strictly_past = torch.tril(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device), diagonal=-1)
    # everything that is not the past is the future
    return ~strictly_past


def scaled_dot_product_scores(queries, keys):
    return queries @ keys.transpose(-1, -2) / math.sqrt(keys.size(-1))


def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1 or window < 1:
        raise ValueError("bad arguments")
    r = torch.arange(num_tokens, device=device)
    i, j = r[:, None], r[None, :]
    return (j > i) | (j <= i - window)
