import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return torch.triu(torch.ones(num_tokens, num_tokens, device=device), diagonal=1).bool()


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    future = causal_mask(T, device=weights.device)
    w = weights.masked_fill(future, 0.0)
    sums = w.sum(-2)  # (..., T): one sum per ... row? 
    # divide each row by its sum: go through the transpose so the broadcast lines up
    return (w.transpose(-1, -2) / sums.unsqueeze(-1)).transpose(-1, -2)
