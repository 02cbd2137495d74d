"""lookup: answer thousands of offset/timestamp lookups (ListOffsets semantics) from a CSV, JSON-lines or Delta file."""
import sys

from udfs.lookup_job import entry

if __name__ == "__main__":
    sys.exit(entry())
