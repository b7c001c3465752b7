"""Tooling around the course, not part of what it teaches.

``doctor``       ``python -m course_lib doctor``: checks the environment, one line per problem
                 with its fix (also orphaned workers and stale shared memory of earlier runs).
``slides``       ``python -m course_lib slides``: offline reveal.js decks of every notebook
                 (templates in ``templates/``).
``student``      ``python -m course_lib student``: the student edition in ``build/student/``, a
                 folder that installs and opens on its own (``templates/student/``).
``scratch``      ``python -m course_lib scratch``: the scratch edition in ``build/scratch/``, the
                 student edition in which the learner writes the teaching core, stubbed from
                 the source and graded by :mod:`course_lib.grading` (``templates/scratch/``).
``labsettings``  ``python -m course_lib lab-settings``: JupyterLab without its news pop-up in
                 this environment (``make install`` runs it).
``paths``        where the repository is (:func:`paths.repo_root`), for every tool.
``cells``        what slides and student read from a notebook cell (tags, slide type, source).
"""
