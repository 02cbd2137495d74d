"""retention: decide Kafka's time, size and log-start-offset retention as a broker would; dry run unless --execute."""
import sys

from udfs.retention_job import entry

if __name__ == "__main__":
    sys.exit(entry())
