"""The instructor's side of the grader: everything a learner's kit never ships.

Here live the hidden cases and the suite built from them (``cases``, ``suite``),
the verdict rules (``verdict``, ``replies``), the naming of known mistakes
(``diagnosis``, with ``observations``, ``fingerprints``, ``module_trial_model``,
``text_rules`` and ``structure_diagnosis``), the sandbox that runs learners' code (``sandbox``), reading
hand-ins (``intake``, ``review_flags``), grading one submission and a whole
class (``submission_grading``, ``class_grading``), the outputs (``gradebook``,
``rubric`` and ``rubric.toml``, ``heatmaps``, ``templates/``, and the reports:
``report_model`` and a module per file, which ``reports`` writes), and the
instructor's tools (``audit``, ``release``, ``hidden/``).

``attnkit release`` copies ``grader/`` without this folder, so none of it ever
reaches a learner.  The modules at ``grader/`` top level import nothing from
here at module level; where one can use an instructor module (``attnkit check``
naming a known mistake, say), it imports it inside a function and treats
``ImportError`` as "not in this kit".
"""
