def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads:
        raise ValueError("bad num_heads")
    return x.reshape(b, T, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x):
    b, H, T, hd = x.shape
    return x.transpose(1, 2).view(b, T, H * hd)
