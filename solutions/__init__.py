"""Solutions the grader knows: the reference and (later) the catalogue of known mistakes.

Instructor-only: nothing under this package ships in a learner's kit.
"""
