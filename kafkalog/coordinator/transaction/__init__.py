"""``__transaction_state``: the transaction coordinator's records (``records``) and typed rows of them (``rows``)."""
