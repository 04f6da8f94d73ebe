"""Loops forever inside softmax_weights."""


def softmax_weights(scores, dim=-1):
    while True:
        pass
