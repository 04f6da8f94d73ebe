"""Returns None instead of the weights."""


def softmax_weights(scores, dim=-1):
    return None
