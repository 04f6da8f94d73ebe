# 阮 -- 多头注意力：把 d_out 拆成多个头，再拼回去
import torch


def split_heads(x, num_heads):
    b, num_tokens, d_out = x.shape
    if d_out % num_heads != 0:
        raise ValueError("d_out 必须能被 num_heads 整除")
    head_dim = d_out // num_heads
    # (b, T, d_out) -> (b, T, H, hd)：每个词元的特征分成 H 份
    return x.reshape(b, num_tokens, num_heads, head_dim)


def merge_heads(x):
    # (b, H, T, hd) -> (b, T, d_out)：把所有头拼回一行
    b, num_heads, num_tokens, head_dim = x.shape
    return x.reshape(b, num_tokens, num_heads * head_dim)


if __name__ == "__main__":
    x = torch.rand(2, 6, 4)
    heads = split_heads(x, 2)
    print(heads.shape, merge_heads(heads).shape)
