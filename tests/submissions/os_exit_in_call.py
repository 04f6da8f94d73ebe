"""Calls ``os._exit(1)`` inside softmax_weights: no cleanup, no exception, the process just ends."""

import os


def softmax_weights(scores, dim=-1):
    os._exit(1)
