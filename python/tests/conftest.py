import os
import sys

# the tests import the installed package, never the source folder beside them
here = os.path.dirname(os.path.abspath(__file__))
src = os.path.dirname(here)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != src]
