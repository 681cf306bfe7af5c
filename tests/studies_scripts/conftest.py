"""The study scripts of ``studies/`` import each other by file name, as ``python studies/NAME.py``
runs them (its folder first on ``sys.path``): the tests here import them the same way."""

import sys
from pathlib import Path

STUDIES = Path(__file__).resolve().parents[2] / "studies"
if str(STUDIES) not in sys.path:
    sys.path.insert(0, str(STUDIES))
