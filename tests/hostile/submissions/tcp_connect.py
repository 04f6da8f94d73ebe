"""Tries to reach a listener the test started on 127.0.0.1: TCP (by address, by ``localhost`` and over
IPv6 loopback) and UDP.  Every message carries __HOSTILE_TOKEN__.

softmax_weights always fails, saying what each attempt gave.
"""

import json
import socket

TCP_PORT = int("__HOSTILE_TCP_PORT__")
UDP_PORT = int("__HOSTILE_UDP_PORT__")
_OUTCOME = None


def _attempts():
    outcome = {}
    for label, host in (("tcp-127.0.0.1", "127.0.0.1"), ("tcp-localhost", "localhost"), ("tcp-::1", "::1")):
        try:
            with socket.create_connection((host, TCP_PORT), timeout=1) as conn:
                conn.sendall(b"__HOSTILE_TOKEN__")
            outcome[label] = "connected"
        except OSError as exc:
            outcome[label] = type(exc).__name__
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.sendto(b"__HOSTILE_TOKEN__", ("127.0.0.1", UDP_PORT))
        outcome["udp-127.0.0.1"] = "sent"
    except OSError as exc:
        outcome["udp-127.0.0.1"] = type(exc).__name__
    return outcome


def softmax_weights(scores, dim=-1):
    global _OUTCOME
    if _OUTCOME is None:
        _OUTCOME = _attempts()
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(_OUTCOME, sort_keys=True, separators=(",", ":")))
