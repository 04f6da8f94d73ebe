# HW3 part 1 -- 自注意力（带可训练权重）
import torch
import torch.nn as nn


def scaled_dot_product_scores(queries, keys):
    d_k = keys.shape[-1]
    return queries @ keys.transpose(-2, -1) / d_k ** 0.5


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        attn_weights = torch.softmax(scaled_dot_product_scores(queries, keys), dim=-1)
        return attn_weights @ values


if __name__ == "__main__":
    torch.manual_seed(789)
    inputs = torch.tensor(
        [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
         [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]
    )
    print(SelfAttention(3, 2)(inputs))
