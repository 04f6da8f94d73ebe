"""attnkit exercises: attention from scratch, one function at a time.

Each module holds the stubs of one exercise group (scores.py, masking.py, …; `attnkit contract`
lists every function and its group); replace every `raise NotImplementedError(...)` with your code.
The public tests sit beside them (test_<group>.py) and name the exercise each one checks.

Check your work with `pytest exercises --solution exercises` (or `attnkit check`).
The grader finds your functions here, by name, so keep the names and signatures.
"""
