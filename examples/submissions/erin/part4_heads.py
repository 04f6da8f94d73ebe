# Erin -- part 4: splitting and merging heads
def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d={d} is not divisible by num_heads={num_heads}")
    hd = d // num_heads
    return x.view(b, num_heads, T, hd)  # (b, H, T, hd)


def merge_heads(x):
    b, H, T, hd = x.shape
    return x.transpose(1, 2).reshape(b, T, H * hd).contiguous()
