import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(diagonal=1)


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError(f"expected square scores, got {tuple(scores.shape)}")
    mask = causal_mask(scores.shape[-1], device=scores.device)
    return scores.masked_fill(mask, float("-inf"))


def renormalize_masked_weights(weights):
    # first approach from the book: zero the future, divide by the row sums
    keep = ~causal_mask(weights.shape[-1], device=weights.device)
    masked = weights * keep
    row_sums = masked.sum(dim=-1, keepdim=True)
    return masked / row_sums
