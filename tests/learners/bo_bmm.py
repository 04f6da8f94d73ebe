# 薄 -- 第三章：点积注意力（用批量矩阵乘法）
# 我的输入一直是 (batch, num_tokens, d)，所以用 torch.bmm 就够了
import math

import torch


def dot_product_scores(queries, keys):
    keys_t = keys.transpose(1, 2)  # (b, d, T)
    return torch.bmm(queries, keys_t)  # (b, Tq, Tk)


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / math.sqrt(keys.shape[-1])


def context_vectors(weights, values):
    return weights.bmm(values)  # (b, Tq, Tk) @ (b, Tk, dv)


if __name__ == "__main__":
    torch.manual_seed(123)
    x = torch.rand(2, 6, 3)
    w = torch.softmax(scaled_dot_product_scores(x, x), dim=-1)
    print(context_vectors(w, x).shape)
