"""Calls ``sys.exit()`` at import: nothing after this line is ever defined."""

import sys

sys.exit()
