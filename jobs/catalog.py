"""catalog: list every segment of every partition (offsets, sizes, timestamps, indexes) into a Delta table."""
import sys

from udfs.catalog_job import entry

if __name__ == "__main__":
    sys.exit(entry())
