"""diverge: where several brokers' copies of each partition differ and what Kafka's truncation keeps, into Delta."""
import sys

from udfs.diverge_job import entry

if __name__ == "__main__":
    sys.exit(entry())
