"""The learner's side of the sandbox: what runs in the template and in each child, and nothing else of the kit.

The grader starts a *template* process (:data:`grader.instructor.sandbox.TEMPLATE_BOOT`) that imports torch once, then
forks one child per submission, holding only the learner's code (never the reference, the mistakes or the hidden
cases); :func:`grader.child.contain.contain` sandboxes it before any learner code runs.  This package imports only the
standard library, torch, safetensors, msgspec, matplotlib, pyseccomp and its own modules (``tests/test_import_rules.py``
holds it to that).  Trusted code imports the loading helpers from here too, so both find hooks the same way.

One idea a module: :mod:`.wire` (framing, every reply's declaration), :mod:`.load` (modules and hooks), :mod:`.call`
(one hook call), :mod:`.spawns` (threads and processes), :mod:`.figures`, :mod:`.modules` (the reference's weights in a
learner's module), :mod:`.policy` (the containment as data), :mod:`.contain` (applying it), :mod:`.serve` (the loops).
"""
