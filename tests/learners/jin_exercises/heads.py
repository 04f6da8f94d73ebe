def split_heads(x, num_heads):
    b, t, d = x.shape
    if d % num_heads != 0:
        raise ValueError("d 必须能被 num_heads 整除")
    return x.reshape(b, t, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x):
    b, h, t, hd = x.shape
    return x.transpose(1, 2).contiguous().view(b, t, h * hd)
