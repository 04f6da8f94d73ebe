# 田 -- 第三章练习：多头的拆分与合并
# split_heads / merge_heads 按 hookspecs 的签名写
import torch


def split_heads(x, num_heads):
    b, num_tokens, d_out = x.shape
    if d_out % num_heads != 0:
        raise ValueError("d_out 必须能被 num_heads 整除")
    head_dim = d_out // num_heads
    # (b, T, d_out) -> (b, T, H, hd) -> (b, H, T, hd)
    x = x.reshape(b, num_tokens, num_heads, head_dim)
    return x.transpose(1, 2)


def merge_heads(x):
    b, num_heads, num_tokens, head_dim = x.shape
    # 先把头挪回词元后面: (b, H, T, hd) -> (b, T, H, hd)
    x = x.transpose(1, 2)
    # 再把所有头拼成一行
    context_vec = x.view(b, num_tokens, num_heads * head_dim)
    return context_vec


if __name__ == "__main__":
    torch.manual_seed(123)
    inputs = torch.rand(2, 6, 4)
    heads = split_heads(inputs, 2)
    print("heads:", heads.shape)
    print("merged:", merge_heads(heads).shape)
