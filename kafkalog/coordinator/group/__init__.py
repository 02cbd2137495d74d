"""``__consumer_offsets``: the group coordinator's records (``records``) and typed rows of them (``rows``)."""
