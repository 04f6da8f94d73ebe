"""softmax_weights calls ``sys.exit(0)``; context_vectors calls ``os._exit(0)``."""

import os
import sys


def softmax_weights(scores, dim=-1):
    sys.exit(0)


def context_vectors(weights, values):
    os._exit(0)
