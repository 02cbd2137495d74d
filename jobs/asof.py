"""asof: a compacted topic as a table as of a time or offsets, written to a Delta table."""
import sys

from udfs.asof_job import entry

if __name__ == "__main__":
    sys.exit(entry())
