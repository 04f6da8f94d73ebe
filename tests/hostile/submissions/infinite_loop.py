"""softmax_weights spins forever, ignoring SIGTERM and SIGINT; only a kill stops it."""

import signal


def softmax_weights(scores, dim=-1):
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        pass
