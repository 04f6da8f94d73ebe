def split_heads(x, num_heads):
    b, t, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"{d} is not divisible by {num_heads} heads")
    # reshape (not view): the input may be a non-contiguous view
    return x.reshape(b, t, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x):
    b, h, t, hd = x.shape
    return x.transpose(1, 2).contiguous().view(b, t, h * hd)
