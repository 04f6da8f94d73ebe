def split_heads(x, num_heads):
    b, num_tokens, d_out = x.shape
    if d_out % num_heads != 0:
        raise ValueError("d_out must be divisible by num_heads")
    head_dim = d_out // num_heads
    # (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
    return x.reshape(b, num_tokens, num_heads, head_dim).transpose(1, 2)


def merge_heads(x):
    b, num_heads, num_tokens, head_dim = x.shape
    return x.transpose(1, 2).contiguous().view(b, num_tokens, num_heads * head_dim)
