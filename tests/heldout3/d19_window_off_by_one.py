import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(diagonal=1)


def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1 or window < 1:
        raise ValueError("num_tokens and window must be >= 1")
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(diagonal=1)
    # keys more than `window` positions back are out of the window
    too_old = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).tril(diagonal=-window - 1)
    return future | too_old
