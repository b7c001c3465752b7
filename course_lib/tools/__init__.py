"""Tooling around the course, not part of what it teaches.

``doctor``  ``python -m course_lib doctor``: checks the environment, one line per problem
            with its fix (also orphaned workers and stale shared memory of earlier runs).
``slides``  ``python -m course_lib slides``: offline reveal.js decks of every notebook
            (templates in ``templates/``).
``student`` ``python -m course_lib student``: the student edition in ``build/student/``.
``cells``   what slides and student read from a notebook cell (tags, slide type, source).
"""
