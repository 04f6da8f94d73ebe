#%% 掩码+带训练权重的自注意力机制（照着博客改的，改成了 batch 版本）
import torch
import torch.nn as nn
import torch.nn.functional as F  # 该类提供了卷积，池化，激活等函数


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()  # 继承神经网络
        # Wq,Wk,Wv的初始化
        self.Wq_matrix = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.Wk_matrix = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.Wv_matrix = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        # 上三角(不包含对角线)矩阵，句子长度是 6
        self.register_buffer("mask", torch.triu(torch.ones(6, 6), diagonal=1))

    def forward(self, inputs):
        # 前向传播计算q,k,v
        q = self.Wq_matrix(inputs)
        k = self.Wk_matrix(inputs)
        v = self.Wv_matrix(inputs)
        attention_scores = q @ k.transpose(1, 2)  # 注意力分数
        attention_weights = F.softmax(attention_scores / k.shape[-1] ** 0.5, dim=1)  # softmax归一化权重系数
        masked = attention_weights.masked_fill(self.mask.bool(), -torch.inf)  # 对上半部分掩码为 -inf
        attention_weights = F.softmax(masked, dim=-1)  # 再次使用softmax归一化
        attention_weights = self.dropout(attention_weights)
        context_vec_matrix = attention_weights @ v  # 线性叠加求上下文向量矩阵
        return context_vec_matrix


#%% 测试
inputs = torch.tensor(
    [[0.43, 0.15, 0.89],  # Your     (x^1)
     [0.55, 0.87, 0.66],  # journey  (x^2)
     [0.57, 0.85, 0.64],  # starts   (x^3)
     [0.22, 0.58, 0.33],  # with     (x^4)
     [0.77, 0.25, 0.10],  # one      (x^5)
     [0.05, 0.80, 0.55]]  # step     (x^6)
)
if __name__ == "__main__":
    torch.manual_seed(123)
    ca = CausalAttention(3, 2, 6, 0.1)
    print(ca(inputs.unsqueeze(0)))
