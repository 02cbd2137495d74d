"""The conformance suite draws its logs with the cleaner tests' strategies (tests/cleaner)."""
import sys
from pathlib import Path

CLEANER_TESTS = str(Path(__file__).resolve().parent.parent / "cleaner")
if CLEANER_TESTS not in sys.path:
    sys.path.append(CLEANER_TESTS)
