"""第三章作业 -- 多头注意力。Xing.

我习惯了 GPT 代码里的写法：q、k、v 用一个线性层一次算出来（输出宽度 3 * d_out），再切成三份。
"""

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} 不能被 num_heads={num_heads} 整除")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)  # 一次算出 q, k, v
        self.proj = nn.Linear(d_out, d_out)  # 合并各头之后的投影
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, _ = x.shape
        queries, keys, values = self.qkv(x).chunk(3, dim=-1)  # 每份 (b, T, d_out)

        # (b, T, d_out) -> (b, num_heads, T, head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.proj(context_vec)


if __name__ == "__main__":
    torch.manual_seed(123)
    inputs = torch.tensor(
        [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
         [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]
    )  # fmt: skip
    batch = torch.stack((inputs, inputs), dim=0)
    mha = MultiHeadAttention(3, 4, batch.shape[1], 0.0, num_heads=2)
    print(mha(batch))
    print(mha(batch).shape)  # torch.Size([2, 6, 4])
