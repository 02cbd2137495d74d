"""reindex: verify every segment index against Kafka's recovery rebuild (identical/valid/missing/corrupt) and rebuild the ones that differ."""
import sys

from udfs.reindex_job import entry

if __name__ == "__main__":
    sys.exit(entry())
