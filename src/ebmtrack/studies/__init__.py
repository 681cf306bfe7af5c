"""Studies that a command runs: :mod:`~ebmtrack.studies.regression1d` (``ebmtrack regress1d``).

The other studies are scripts in the repository's ``studies/`` folder, run as
``python studies/NAME.py``; they are not part of the installed package.
"""
