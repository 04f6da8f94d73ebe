import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens 必须 >= 1")
    # 书上的写法：对角线以上是 1
    return torch.triu(torch.ones(num_tokens, num_tokens, device=device), diagonal=1)


def apply_causal_mask(scores):
    n = scores.shape[-1]
    if scores.shape[-2] != n:
        raise ValueError("scores 必须是 (..., T, T)")
    return scores.masked_fill(causal_mask(n, scores.device).bool(), -torch.inf)


def renormalize_masked_weights(weights):
    # 简单的方法：下三角矩阵乘上去，把未来的权重变成 0
    n = weights.shape[-1]
    mask_simple = torch.tril(torch.ones(n, n, device=weights.device, dtype=weights.dtype))
    return weights * mask_simple
