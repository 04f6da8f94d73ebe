# 第3章练习：手写 dropout（参考《动手学深度学习》4.6 节的 dropout_layer）
import torch


def dropout_scale(weights, keep_mask, p):
    # inverted dropout: 保留下来的元素除以 (1 - p)
    if p < 0 or p > 1:
        raise ValueError("p 必须在 [0, 1] 之间")
    if p == 1:
        return torch.zeros_like(weights)
    return weights * keep_mask.to(weights.dtype) / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if p < 0 or p > 1:
        raise ValueError("dropout 概率必须在 [0, 1] 之间")
    if not training or p == 0:
        return weights.clone()
    # 本情况中，所有元素都被丢弃
    if p == 1:
        return torch.zeros_like(weights)
    # 否则每个元素以 1-p 的概率被保留
    mask = (torch.rand(weights.shape) > p).float()
    return mask * weights / (1.0 - p)


if __name__ == "__main__":
    torch.manual_seed(123)
    attn_weights = torch.softmax(torch.randn(6, 6), dim=-1)
    print(attention_dropout(attn_weights, 0.5))
    print(attention_dropout(attn_weights, 0.5, training=False))
