# Qin -- softmax with a temperature, written out by hand
import torch


def softmax_with_temperature(scores, temperature, dim=-1):
    # divide by T, then exp and normalise
    exp_scores = torch.exp(scores / temperature)
    return exp_scores / exp_scores.sum()


if __name__ == "__main__":
    torch.manual_seed(123)
    x = torch.tensor([2.0, 1.0, 0.1])
    for t in (0.5, 1.0, 2.0):
        print(t, softmax_with_temperature(x, t))
