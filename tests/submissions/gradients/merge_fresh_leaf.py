# merge_heads hands back a fresh leaf: it requires grad, but nothing flows back to the heads
def merge_heads(x):
    b, h, t, d = x.shape
    merged = x.transpose(1, 2).contiguous().view(b, t, h * d)
    return merged.detach().requires_grad_()
