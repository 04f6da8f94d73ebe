# Qiu -- dropout exercises
import torch


def dropout_scale(weights, keep_mask, p):
    if not 0 <= p <= 1:
        raise ValueError(f"bad p={p}")
    if p == 0:
        return weights * keep_mask
    return weights * keep_mask / p


def attention_dropout(weights, p, training=True, generator=None):
    if not 0 <= p <= 1:
        raise ValueError(f"bad p={p}")
    if p == 0:
        return weights.clone()
    if p == 1:
        return torch.zeros_like(weights)
    # TODO: training flag?
    keep = torch.rand_like(weights) >= p
    return weights * keep / (1 - p)


if __name__ == "__main__":
    torch.manual_seed(123)
    example = torch.ones(6, 6)
    print(attention_dropout(example, 0.5))
