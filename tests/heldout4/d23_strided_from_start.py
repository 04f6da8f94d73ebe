import torch


def strided_mask(num_tokens, stride, device=None):
    if stride < 1 or num_tokens < 1:
        raise ValueError("stride and num_tokens must be at least 1")
    pos = torch.arange(num_tokens, device=device)
    q = pos.view(-1, 1)
    k = pos.view(1, -1)
    local = (q - k) < stride
    summary = (k % stride) == 0  # every stride-th token is a "summary" column
    ok = (k <= q) & (local | summary)
    return ~ok


def dilated_window_mask(num_tokens, window, dilation, device=None):
    if num_tokens < 1 or window < 1 or dilation < 1:
        raise ValueError("arguments must be at least 1")
    pos = torch.arange(num_tokens, device=device)
    back = pos.view(-1, 1) - pos.view(1, -1)
    ok = (back >= 0) & (back % dilation == 0) & (back <= (window - 1) * dilation)
    return ~ok
