"""lag: consumer groups' committed offsets and lag from the log dirs' __consumer_offsets, into a Delta table."""
import sys

from udfs.lag_job import entry

if __name__ == "__main__":
    sys.exit(entry())
