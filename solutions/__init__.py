"""Solutions the grader knows: the reference (``reference``) and the catalogue of known mistakes (``mistakes``).

Instructor-only: nothing under this package ships in a learner's kit.
"""
