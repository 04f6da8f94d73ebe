import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be positive")
    return torch.ones(num_tokens, num_tokens, device=device).triu(diagonal=1).bool()


def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1 or window < 1:
        raise ValueError("num_tokens and window must be positive")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    future = ones.triu(diagonal=1)
    # too far back: below the window-th sub-diagonal
    too_old = ones.tril(diagonal=-(window + 1))
    return future | too_old
