"""The kit's own exercise groups, one module each, declared the way a course's own pack declares its groups.

A group's module is its *contract*, the learner's half, which ships in a learner's kit.  It holds:

- ``ROWS``: one :class:`~grader.hook_row.HookRow` per hook, in the order a learner meets them;
- one ``@hookspec(firstresult=True)`` function per hook (the signature and the contract in its docstring), or
  ``HOOKSPECS``, a module holding them;
- ``POSITION`` (an int, 100 if absent): groups are ordered by it, then by name;
- the instructor's half, named by module so that the learner's kit never imports it: ``HIDDEN_CASES`` (a module
  with ``hidden_cases(m: Maker) -> {hook: [Case, ...]}``), ``REFERENCE`` (``@hookimpl`` functions, the gold
  answers) and ``MISTAKES`` (a module with ``CATALOGUE``, the known mistakes; ``REFERENCE`` where absent);
- ``STUB`` and ``PUBLIC_TESTS``, for a group installed from elsewhere: the modules a release copies into the
  kit as ``exercises/<group>.py`` and ``exercises/test_<group>.py`` (the kit's own groups live there already).

:mod:`grader.packs` finds these modules: this package through the entry-point group ``attnkit.exercises``
(where the kit is installed; by its name where it is not), and every other pack through the same group.
"""
