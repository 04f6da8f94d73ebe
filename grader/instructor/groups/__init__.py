"""The hidden cases of the exercise groups, one module per group: the chapter's, patterns (instructor-only).

A group's contract (:mod:`grader.groups`) names its module here as ``HIDDEN_CASES``; each holds
``hidden_cases(m: Maker) -> {hook: [Case, ...]}``, built from :mod:`grader.instructor.cases`.
"""
