# Pei -- causal mask with numpy (I find np.triu easier to read)
import numpy as np
import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens should be positive")
    # upper triangle = the future, hide it
    mask = np.triu(np.ones((num_tokens, num_tokens))).astype(bool)
    return mask


if __name__ == "__main__":
    print(causal_mask(5))
    scores = torch.rand(5, 5)
    print(scores.masked_fill(torch.from_numpy(causal_mask(5)), -torch.inf))
