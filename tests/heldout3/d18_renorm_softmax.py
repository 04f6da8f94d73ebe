import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device), diagonal=1)


def apply_causal_mask(scores):
    if scores.size(-1) != scores.size(-2):
        raise ValueError("square scores expected")
    return scores.masked_fill(causal_mask(scores.size(-1), scores.device), float("-inf"))


def renormalize_masked_weights(weights):
    # mask the future, then normalise the rows again
    masked = apply_causal_mask(weights)
    return torch.softmax(masked, dim=-1)
