"""``kafkalog dump``: Kafka's ``kafka-dump-log.sh`` (``kafka.tools.DumpLogSegments``) in Python.

One module per file type (``log_segment``: .log/.bin/.checkpoint record files, ``offset_index``,
``time_index``, ``txn_index``, ``producer_snapshot``), the batch walk they share (``batch_walk``),
Kafka's control records (``control_records``), the file names (``file_names``), the state of a run
the per-file modules write into (``dump_run``) and the run that dispatches files to them and prints
Kafka's end-of-run reports (``dumper``; nothing imports it back). The functions yield output lines
instead of printing, so the dump can be tested (and reused) without a subprocess:
:class:`~kafkalog.tools.dump.dumper.Dumper` turns a list of files into
:class:`~kafkalog.tools.dump.output.Line` objects, each tagged ``"stdout"`` or ``"stderr"``, and
``kafkalog.tools.cli`` writes them out; :func:`~kafkalog.tools.dump.dumper.dump` collects a whole run.

This docstring is the output contract of the whole package.

Text output (the default) is line for line what DumpLogSegments prints, so scripts written against
``kafka-dump-log.sh`` keep working (checked against Kafka's ``DumpLogSegments.java``):

* every file starts with ``Dumping <file as given>``;
* files dispatch on the text after the LAST dot of the name: ``.log`` (and ``.bin``, for raw
  record sets such as fetched byte ranges) and ``.checkpoint`` (KRaft snapshots) are record
  files, then ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot`` (producer state); anything
  else prints ``Ignoring unknown file <file>`` on stderr (so ``x.log.deleted`` is ignored, as in
  Kafka);
* a record file prints ``Log starting offset: <base>`` (the digits before the first dot of the
  name, as Kafka parses it), one line per batch, with ``--deep-iteration`` / ``--print-data-log``
  one ``| offset: …`` line per record, and ``Found N invalid bytes at the end of <name>`` when
  bytes remain that do not form a batch (not with ``--max-bytes``);
* index files print their entries (``offset: O position: P``, ``timestamp: T offset: O``,
  ``version: … producerId: …``), ``<file> is empty.``, ``<file> passed sanity check.``;
* after all files, stderr gets Kafka's reports: ``Mismatches in :<abs path>`` (offset index entries
  whose position does not start a batch ending at the entry's offset; by index offset, descending),
  the three time-index reports, and with deep iteration ``Non-consecutive offsets in <abs path>``
  (counted from -1, so a file whose first record is not offset 0 has one; one line per previous
  offset, ascending), each report's files in the order Kafka 4.4's HashMap iterates them
  (``dumper.java_hash_map_order``) — checked against DumpLogSegments 4.4.0 by
  ``tests/broker/test_dump_parity.py``;
* deep-iteration text of plain v2 batches is formatted in bulk (``record_lines``) and comes as
  ``stdout-bytes`` blocks of many lines; the bytes are those of the per-record path.

Decisions where Kafka has no answer (Kafka would die with a stack trace):

* A record file whose name does not start with digits (``fetch1.records.bin``, ``foo.log``) prints
  ``Log starting offset: <base offset of its first batch>`` (for a compressed legacy wrapper the
  offset of its first inner message), or ``-1`` when the file holds no complete batch.
* Bad input never stops the run. A problem is reported on stderr as
  ``kafkalog dump: error: <file>: byte <position>: <what>`` and makes the exit code 1; the dump
  then goes on with the next batch when the batch framing is intact (CRC mismatch — the batch line
  still says ``isvalid: false`` — undecodable records, bad control records, an unknown codec), or
  with the next file when it is not (a header size below 14, which is where Kafka throws
  ``CorruptRecordException``; a v2 batch shorter than its header; an unknown magic). A truncated
  tail prints Kafka's ``Found N invalid bytes`` line and is also reported as an error.
* Index files: a size that is not a multiple of the entry size (8, 12, 34) is an error after the
  whole entries are printed (Kafka counts ``length / entrySize`` entries and only its sanity check
  complains); a name without a numeric base offset is an error (Kafka throws
  ``NumberFormatException``); an index whose ``.log`` is missing is still printed, with a warning
  on stderr — only ``--verify-index-only`` turns that into an error (Kafka cannot open the index
  without its log at all). An offset-index entry whose position does not hold a complete batch
  within ``--max-message-size`` bytes is an error (Kafka throws ``NoSuchElementException``).
* Deep iteration does not verify CRCs (neither does Kafka); the ``isValid``/``crc`` of legacy
  records are those of each (inner) message, as Kafka prints them.

JSON output (``--json``): one JSON object per line on stdout, nothing else on stdout; problems
still go to stderr as text and into the file's summary. Every object has ``type`` and ``file``
(the path as given). Types and keys:

``batch`` (one per batch, with or without deep iteration)
    ``position``, ``size`` (incl. the 12-byte log overhead), ``magic``, ``baseOffset`` (legacy
    wrapper: its first inner offset, null when the wrapper cannot be decompressed),
    ``lastOffset``, ``count`` (v2 recordsCount; null for legacy, like Kafka's ``countOrNull``),
    ``baseSequence``, ``lastSequence``, ``producerId``, ``producerEpoch``,
    ``partitionLeaderEpoch``, ``isTransactional``, ``isControl``, ``deleteHorizonMs`` (null when
    the attribute bit is clear), ``timestampType`` ("CreateTime", "LogAppendTime",
    "NoTimestampType"), ``baseTimestamp``, ``maxTimestamp``, ``attributes``, ``compresscodec``
    ("none", "gzip", "snappy", "lz4", "zstd", "unknown(N)"), ``crc`` (unsigned), ``isvalid``.
``record`` (with ``--deep-iteration`` or ``--print-data-log``)
    ``batchPosition``, ``offset``, ``timestamp``, ``timestampType``, ``keySize``, ``valueSize``
    (-1 for null), ``sequence`` (v2; null for legacy), ``headerKeys`` (list of str),
    ``isValid`` / ``crc`` (legacy message CRC; null for v2), ``isControl``; control records add
    ``controlType`` ("COMMIT", "ABORT", "LEADER_CHANGE", …, "UNKNOWN") and ``controlTypeId``,
    markers add ``coordinatorEpoch``, KRaft snapshot/version/voters records add ``controlRecord``
    (the decoded message as Kafka's JSON converters name it). With ``--print-data-log`` (also for
    control records): ``key_b64``, ``value_b64`` (base64, null for null), ``key``, ``value`` (the
    bytes as text when they are valid UTF-8, else null) and ``headers`` (list of
    ``{"key": str, "value_b64": str|null}``). With ``--offsets-decoder`` / ``--transaction-log-decoder``
    (which imply ``--print-data-log``, as in Kafka) a non-control record adds ``recordType``,
    ``recordTypeName``, ``decodedKey``, ``valueVersion``, ``decodedValue`` (Kafka's JSON, as
    kafka-dump-log.sh prints it), ``tombstone`` and, when it does not decode, ``decodeError``.
``index_entry`` (``offset``, ``position``), ``time_index_entry`` (``timestamp``, ``offset``),
``txn_index_entry`` (``version``, ``producerId``, ``firstOffset``, ``lastOffset``,
``lastStableOffset``), ``producer_snapshot_entry`` (``producerId``, ``producerEpoch``,
``coordinatorEpoch``, ``currentTxnFirstOffset`` (null when none), ``lastTimestamp``,
``firstSequence``, ``lastSequence``, ``lastOffset``, ``offsetDelta``, ``timestamp`` — the last
five null when the entry has no batch metadata), ``sanity_check`` (``passed``: true).
    Entries are not emitted with ``--verify-index-only``.
``index_mismatch`` (``indexOffset``, ``logOffset``), ``time_index_mismatch`` (``indexTimestamp``,
``logTimestamp``), ``time_index_out_of_order`` (``indexTimestamp``, ``previousTimestamp``),
``time_index_offset_not_found`` (``indexOffset``, ``logOffset``, -1 when no batch reaches it),
``non_consecutive_offsets`` (``from``, ``to``)
    Kafka's end-of-run reports, emitted at the end of their file, in file order.
``summary`` (last object of every file)
    ``kind`` ("log", "index", "timeindex", "txnindex", "snapshot", "unknown"), ``batches``,
    ``records`` (records iterated; null without deep iteration), ``entries`` (index/snapshot
    entries read), ``valid_bytes`` (bytes of complete batches, CRC-invalid ones included; for
    index files the whole entries), ``invalid_bytes`` (bytes after them that do not form a batch
    or entry), ``startOffset`` (record files: the ``Log starting offset``), ``baseOffset`` (index
    files), ``errors`` (list of ``{"error": class name, "message": str, "position": int|null}``).

``--skip-record-metadata`` only changes text output.
"""
