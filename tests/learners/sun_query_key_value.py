# 孙同学的作业：因果注意力
# 我把层的名字写成 self.query / self.key / self.value，看起来更直观
import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # 上三角（不含对角线）为 1 的位置就是"未来"
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        num_tokens = x.shape[1]
        q = self.query(x)
        k = self.key(x)
        v = self.value(x)
        # 用 einsum 算点积：b=batch, i=query 位置, j=key 位置, d=特征
        scores = torch.einsum("bid,bjd->bij", q, k)
        future = self.mask[:num_tokens, :num_tokens] == 1
        scores = scores.masked_fill(future, -float("inf"))
        weights = torch.softmax(scores / (k.shape[-1] ** 0.5), dim=-1)
        weights = self.dropout(weights)
        return torch.einsum("bij,bjd->bid", weights, v)


if __name__ == "__main__":
    inputs = torch.tensor(
        [[0.43, 0.15, 0.89],  # Your
         [0.55, 0.87, 0.66],  # journey
         [0.57, 0.85, 0.64],  # starts
         [0.22, 0.58, 0.33],  # with
         [0.77, 0.25, 0.10],  # one
         [0.05, 0.80, 0.55]]  # step
    )
    batch = torch.stack((inputs, inputs), dim=0)
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, batch.shape[1], 0.0)
    print(ca(batch))
