"""Calls ``os._exit(0)`` at import: the process ends at once, no exception, no cleanup."""

import os

os._exit(0)
