"""dot_product_scores starts a ``sleep 300`` helper and spins forever on 2-D inputs; right otherwise.

The resume test kills the grader while this spins: nothing of it may be left running.
"""

import subprocess


def dot_product_scores(queries, keys):
    if queries.dim() == 2:
        subprocess.Popen(["sleep", "300"])
        while True:
            pass
    return queries @ keys.transpose(-2, -1)
