"""KRaft cluster metadata (``__cluster_metadata-0``): the metadata records and their framing."""
