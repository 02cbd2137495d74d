"""Kafka's coordinator logs read from disk: ``__consumer_offsets`` (``group``), ``__transaction_state``
(``transaction``), the message-schema reader they share (``message``) and offline consumer lag (``lag``)."""
