def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads != 0:
        raise ValueError("d must be divisible by num_heads")
    head_dim = d // num_heads
    return x.reshape(b, num_heads, T, head_dim)


def merge_heads(x):
    b, H, T, hd = x.shape
    return x.reshape(b, T, H * hd)
