"""Tries to reach a Unix-domain socket the test listens on, by its path in the test's temporary folder
(the way to a docker.sock, an ssh-agent or a D-Bus bus), and sends __HOSTILE_TOKEN__.

softmax_weights always fails, saying what the attempt gave.
"""

import json
import socket

PATH = "__HOSTILE_UNIX_SOCKET__"
_OUTCOME = None


def _attempt():
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(1)
            conn.connect(PATH)
            conn.sendall(b"__HOSTILE_TOKEN__")
        return {"unix": "connected"}
    except OSError as exc:
        return {"unix": type(exc).__name__}


def softmax_weights(scores, dim=-1):
    global _OUTCOME
    if _OUTCOME is None:
        _OUTCOME = _attempt()
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(_OUTCOME, sort_keys=True, separators=(",", ":")))
