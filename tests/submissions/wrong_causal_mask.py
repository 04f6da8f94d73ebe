"""A realistic single mistake: ``triu`` with diagonal 0 also masks the diagonal (each token sees nothing of itself)."""

import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError(f"need at least one token, got {num_tokens}")
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device), diagonal=0)
