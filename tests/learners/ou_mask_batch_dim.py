# Ou -- causal mask for a batch of scores
# 1 = the token can see this position, 0 = cannot (下三角 = 能看到的部分)
import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    ones = torch.ones(num_tokens, num_tokens, device=device)
    mask = torch.tril(ones).bool()
    return mask.unsqueeze(0)  # (1, T, T) so it broadcasts over the batch


if __name__ == "__main__":
    torch.manual_seed(123)
    print(causal_mask(4))
    print(causal_mask(6).shape)
