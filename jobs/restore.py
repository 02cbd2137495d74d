"""restore: write a Delta table of records back as a new log dir a Kafka broker loads."""
import sys

from udfs.restore_job import entry

if __name__ == "__main__":
    sys.exit(entry())
