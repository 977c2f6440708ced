"""python/tests/conftest.py: imports the package from this tree (python/)
unless KILN_PY_INSTALLED=1 asks for the installed one; data paths."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if os.environ.get("KILN_PY_INSTALLED") != "1":
    sys.path.insert(0, os.path.dirname(HERE))
CORPUS = os.path.join(ROOT, "tests", "data", "ir")
