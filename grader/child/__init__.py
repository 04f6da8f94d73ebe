"""The learner's side of the sandbox: what runs in the template and in each child, and nothing else of the kit.

The grader starts it as ``python -I -m grader.child`` would (:data:`grader.instructor.sandbox.TEMPLATE_BOOT`): a
*template* process that imports torch once, then forks one child per submission.  A child holds only the
learner's code, written from text into its own work folder; never the reference, the catalogue of mistakes
or the hidden cases.  Before any learner code runs, :func:`grader.child.contain.contain` puts the child in its
sandbox.  This package imports only the standard library, torch, safetensors, msgspec, matplotlib and pyseccomp,
and its own modules (relative imports): ``tests/test_import_rules.py`` holds it to that.  Trusted code imports
the loading helpers from here too, so the sandbox and in-process loading find hooks the same way.

One idea a module: :mod:`.wire` (the framing and the declaration of every reply, both ways), :mod:`.load`
(a submission's modules and hooks), :mod:`.call` (one hook call: arguments, recording banned calls and
memory, the reply), :mod:`.spawns` (threads and processes a call starts), :mod:`.figures` (a Figure read
as data), :mod:`.modules` (the reference's weights in a learner's module), :mod:`.policy` (the containment,
declared as data), :mod:`.contain` (applying it, step by step), :mod:`.serve` (the template and a child's loop).
"""
