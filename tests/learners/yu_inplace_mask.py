# Yu -- causal mask helpers
import torch


def causal_mask(num_tokens, device=None):
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device), diagonal=1)


def apply_causal_mask(scores):
    if scores.shape[-2] != scores.shape[-1]:
        raise ValueError("scores are not square")
    scores.masked_fill_(causal_mask(scores.shape[-1], scores.device), -torch.inf)  # in-place, saves memory
    return scores


def renormalize_masked_weights(weights):
    keep = ~causal_mask(weights.shape[-1], weights.device)
    masked = weights * keep
    return masked / masked.sum(dim=-2, keepdim=True)


if __name__ == "__main__":
    w = torch.softmax(torch.randn(5, 5), dim=-1)
    print(renormalize_masked_weights(w))
