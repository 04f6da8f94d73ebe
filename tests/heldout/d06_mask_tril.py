import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be at least 1")
    # 下三角 = 因果
    return torch.tril(torch.ones(num_tokens, num_tokens, device=device)).bool()


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("not square")
    mask = torch.triu(torch.ones(T, T, device=scores.device, dtype=torch.bool), diagonal=1)
    return scores.masked_fill(mask, -torch.inf)
