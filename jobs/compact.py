"""compact: Kafka's log compaction for every eligible compacted partition, one task per partition, compiled exact key map."""
import sys

from udfs.compact_job import entry

if __name__ == "__main__":
    sys.exit(entry())
