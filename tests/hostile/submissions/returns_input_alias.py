"""renormalize_masked_weights works in place on ``weights`` and returns that very tensor (an alias of the input).

The values it returns are right; the caller's tensor is overwritten with them.
"""


def renormalize_masked_weights(weights):
    weights.tril_()
    weights.div_(weights.sum(dim=-1, keepdim=True))
    return weights
