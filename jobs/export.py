"""export: append new records of the log dirs to a Delta table, exactly once across kills."""
import sys

from udfs.export_job import entry

if __name__ == "__main__":
    sys.exit(entry())
