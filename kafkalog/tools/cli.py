"""The ``kafkalog`` command: one subcommand per task.

Adding a subcommand takes one ``_add_<name>(subparsers)`` function that builds its parser and sets
``handler`` to a ``(args) -> int`` function, listed in ``SUBCOMMANDS``. ``main`` does the rest:
argument errors exit 2 with argparse's message, and so does a :class:`~kafkalog.errors.UsageError`
(a path that is missing or of the wrong kind, an unknown topic or partition, an offset outside the
log); any other :class:`~kafkalog.errors.KafkalogError` that reaches it prints ``kafkalog <command>:
error: <message>`` on stderr and exits 1, and no input ever produces a traceback. Options must be
spelled out: no parser accepts abbreviations (``--exec`` is not ``--execute``).
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import Callable, List, Optional, Sequence

from kafkalog import __version__
from kafkalog.errors import KafkalogError, OffsetOutOfRangeError, UsageError
from kafkalog.fs import filesystem
from kafkalog.tools.arguments import check_log_dir, file_list, non_negative_int, positive_int, topic_name

PROG = "kafkalog"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class ArgumentParser(argparse.ArgumentParser):
    """argparse without abbreviated options, for every parser and subparser (``add_subparsers``
    builds subparsers with the parent's class): a destructive flag must be spelled out."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


# --- output -----------------------------------------------------------------------------------

def _write_line(stream, text: str) -> None:
    """Write one line; characters the stream's encoding cannot hold are escaped, not fatal."""
    try:
        stream.write(text + "\n")
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding) + "\n")


def _write_block(stream, data: bytes) -> None:
    """Write whole lines given as UTF-8 bytes: straight to the binary buffer when the stream is UTF-8."""
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    if encoding == "utf8" and hasattr(stream, "buffer"):
        stream.flush()
        stream.buffer.write(data)
    else:
        stream.write(data.decode("utf-8").encode(encoding or "utf-8", "backslashreplace").decode(encoding or "utf-8"))


# --- dump -------------------------------------------------------------------------------------

def _add_dump(subparsers) -> None:
    p = subparsers.add_parser(
        "dump", help="print segment, index and snapshot files as kafka-dump-log.sh does",
        description="Print the contents of Kafka log files line for line as kafka-dump-log.sh "
                    "(kafka.tools.DumpLogSegments) prints them: .log (and raw record sets named *.bin), "
                    ".index, .timeindex, .txnindex, .snapshot, KRaft .checkpoint. Problems are reported on "
                    "stderr with the file and byte position, and make the exit code 1; the dump goes on "
                    "with the next batch or file.")
    p.add_argument("--files", required=True, type=file_list, metavar="FILE[,FILE...]",
                   help="REQUIRED: the comma-separated list of data and index files to dump")
    p.add_argument("--deep-iteration", action="store_true",
                   help="iterate records, not only batches (implied by --print-data-log)")
    p.add_argument("--print-data-log", action="store_true",
                   help="print each record's key and payload (as UTF-8 text)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the log without printing them")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only run the index sanity check (Kafka's CorruptIndexException rules)")
    p.add_argument("--max-bytes", type=non_negative_int, default=None, metavar="N",
                   help="read at most N bytes of each record file (default: all)")
    p.add_argument("--max-message-size", type=positive_int, default=None, metavar="N",
                   help="bytes read at an offset-index position to find its batch (default: 5242880)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="with --print-data-log, print only '| key: … payload: …' per record")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line instead of Kafka's text (schema: kafkalog.tools.dump docstring)")
    decoders = p.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="decode records as __consumer_offsets records (implies --print-data-log)")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="decode records as __transaction_state records (implies --print-data-log)")
    decoders.add_argument("--cluster-metadata-decoder", action="store_true",
                          help="decode records as KRaft __cluster_metadata records, in segments and snapshots "
                               "(implies --print-data-log)")
    p.set_defaults(handler=_run_dump)


def _check_dump_files(files: Sequence[str]) -> None:
    """Paths that do not exist or are folders are bad arguments (exit 2, nothing dumped); files of
    a kind dump does not read are skipped as kafka-dump-log skips them, unless that is all of them."""
    from kafkalog.tools.dump.file_names import dumps_file_kind

    for path in files:
        if not filesystem.exists(path):
            raise UsageError("no such file", path=path, hint="check the path; --files takes segment and index files "
                                                             "such as <topic>-<partition>/00000000000000000000.log")
        if filesystem.isdir(path):
            example = os.path.join(path, "00000000000000000000.log")
            raise UsageError("is a folder, not a file", path=path, hint=f"name the files inside it, e.g. --files {example}")
    if not any(dumps_file_kind(path) for path in files):
        raise UsageError(f"{', '.join(files)}: not a file kafka-dump-log reads",
                         hint="give .log, .index, .timeindex, .txnindex, .snapshot, .checkpoint or .bin record files")


def _run_dump(args) -> int:
    from kafkalog.tools.dump.dumper import Dumper
    from kafkalog.tools.dump.options import (CLUSTER_METADATA_DECODER, DEFAULT_MAX_MESSAGE_SIZE, OFFSETS_DECODER,
                                             TRANSACTION_LOG_DECODER, DumpOptions)
    from kafkalog.tools.dump.output import STDOUT

    _check_dump_files(args.files)

    options = DumpOptions(
        deep_iteration=args.deep_iteration, print_data_log=args.print_data_log,
        verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
        max_bytes=args.max_bytes,
        max_message_size=DEFAULT_MAX_MESSAGE_SIZE if args.max_message_size is None else args.max_message_size,
        skip_record_metadata=args.skip_record_metadata, json=args.json,
        decoder=OFFSETS_DECODER if args.offsets_decoder else TRANSACTION_LOG_DECODER if args.transaction_log_decoder
        else CLUSTER_METADATA_DECODER if args.cluster_metadata_decoder else None)
    dumper = Dumper(options, prog=f"{PROG} dump")
    for line in dumper.dump_files(args.files):
        if isinstance(line.text, bytes):          # STDOUT_BYTES
            _write_block(sys.stdout, line.text)
        elif line.stream == STDOUT:
            _write_line(sys.stdout, line.text)
        else:
            sys.stdout.flush()       # keep errors next to the lines they follow
            _write_line(sys.stderr, line.text)
    sys.stdout.flush()
    return dumper.exit_code


# --- demo -------------------------------------------------------------------------------------

def _add_demo(subparsers) -> None:
    p = subparsers.add_parser("demo", help="write a demo Kafka log directory",
                              description="Write a log directory of generated partitions, as a broker would.")
    p.add_argument("out", help="directory to write: a new or empty folder (an existing log dir is refused)")
    p.add_argument("--partitions", type=positive_int, default=3, metavar="N", help="partitions (default: 3)")
    p.add_argument("--records", type=non_negative_int, default=20000, metavar="N",
                   help="records per partition (default: 20000)")
    p.add_argument("--compression", choices=CODECS, default="none", help="codec of the batches (default: none)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    p.add_argument("--topic", default="demo-orders", type=topic_name, help="the topic's name (default: demo-orders)")
    p.add_argument("--consumer-groups", type=non_negative_int, default=0, metavar="N",
                   help="also write __consumer_offsets with N consumer groups' commits on the topic (default: 0)")
    p.add_argument("--compacted-topic", type=topic_name, metavar="TOPIC", help="also write TOPIC for compaction: keys, "
                   "tombstones, an aborted and a committed transaction")
    p.set_defaults(handler=_run_demo)


def _run_demo(args) -> int:
    try:
        demo = importlib.import_module("kafkalog.tools.demo")
    except ModuleNotFoundError as e:
        if e.name != "kafkalog.tools.demo":
            raise
        print(f"{PROG} demo: error: the demo is not available in this installation (no module kafkalog.tools.demo)",
              file=sys.stderr)
        return 2
    code = demo.main(args)
    return 0 if code is None else int(code)


# --- offsets / fetch (kafkalog.lookup.partition_log) -------------------------------------------------------

def _time_spec(text: str) -> int:
    from kafkalog.lookup.time_spec import parse_time_spec
    try:
        return parse_time_spec(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _partition_list(text: str) -> List[int]:
    """GetOffsetShell's --partitions: comma-separated partition ids."""
    try:
        parts = sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--partitions expects a comma separated list of numeric partition ids, but received: {text}") from None
    if not parts or parts[0] < 0:
        raise argparse.ArgumentTypeError(f"partition ids must be >= 0: {text!r}")
    return parts


def _add_log_dir_arguments(p) -> None:
    p.add_argument("--log-dirs", required=True, type=file_list, metavar="DIR[,DIR...]",
                   help="REQUIRED: the broker's log dirs (log.dirs), comma-separated")
    p.add_argument("--topic", required=True, help="REQUIRED: the topic (its exact name)")
    p.add_argument("--isolation", choices=("log_end", "high_watermark", "read_committed"), default="log_end",
                   help="log_end (default): read up to the log end offset, latest = LEO, as the log layer "
                        "answers; high_watermark: up to the checkpointed high watermark, as a read_uncommitted "
                        "client is answered (replication-offset-checkpoint; it lags the broker by up to 5 s); "
                        "read_committed: up to the last stable offset (the first offset of a transaction still "
                        "open, replayed from the batch headers), as a read_committed client is answered")
    p.add_argument("--json", action="store_true", help="one JSON object per line instead of text")


def _find_partition_dirs(log_dirs: Sequence[str], topic: str, partitions: Optional[Sequence[int]]):
    """{partition: (partition folder, its log dir)} of the live replicas of ``topic``; a missing log
    dir, topic or partition, or a replica in two log dirs, is a KafkalogError saying what to do."""
    from kafkalog.fs.names import LIVE, parse_partition_dir_name

    found: dict = {}
    topics: set = set()
    for log_dir in log_dirs:
        check_log_dir(log_dir)
        try:
            entries = {entry.name: entry for entry in filesystem.scandir(log_dir)}
            names = sorted(entries)
        except OSError as e:
            raise UsageError(f"cannot list the log dir ({e.strerror or e})", path=log_dir) from None
        for name in names:
            try:
                t, partition, kind = parse_partition_dir_name(name)
            except KafkalogError:
                continue
            if kind != LIVE or not entries[name].is_dir():
                continue
            topics.add(t)
            if t != topic:
                continue
            if partition in found:
                raise KafkalogError(
                    f"{topic}-{partition} is in two log dirs ({found[partition][1]} and {log_dir})",
                    hint="a broker refuses to start like this; pass only the log dir that holds the replica you want")
            found[partition] = (os.path.join(log_dir, name), log_dir)
    where = ", ".join(log_dirs)
    if not found:
        known = ", ".join(sorted(topics)[:20])
        raise UsageError(f"topic {topic!r} has no partition folder in {where}",
                         hint=f"check --topic and --log-dirs; topics there: {known}" if known else
                         "there are no <topic>-<partition> folders there: is it a broker's log dir?")
    if partitions is not None:
        missing = [p for p in partitions if p not in found]
        if missing:
            raise UsageError(
                f"partition(s) {','.join(map(str, missing))} of topic {topic!r} not found in {where}",
                hint=f"partitions present: {','.join(map(str, sorted(found)))}")
        found = {p: found[p] for p in partitions}
    return found


def _open_partition(path: str, log_dir: str):
    from kafkalog.lookup.partition_log import PartitionLog
    try:
        return PartitionLog.open(path, log_dir=log_dir)
    except OSError as e:
        raise KafkalogError(f"cannot read the partition folder ({e.strerror or e})",
                            path=getattr(e, "filename", None) or path) from None


def _warn(command: str, text: str) -> None:
    sys.stdout.flush()
    _write_line(sys.stderr, f"{PROG} {command}: warning: {text}")


def _add_offsets(subparsers) -> None:
    p = subparsers.add_parser(
        "offsets", help="offsets by time (earliest, latest, max-timestamp, a timestamp) as kafka-get-offsets.sh",
        description="Answer ListOffsets from the files, as the broker does, and print topic:partition:offset "
                    "lines as kafka-get-offsets.sh (GetOffsetShell) prints them: sorted by 'topic-partition', "
                    "a partition with no answer (offset -1: a timestamp past the last record, max-timestamp "
                    "without timestamps) is left out. --json prints every partition with its timestamp, "
                    "leader epoch, segment and why. Rules and choices: kafkalog.lookup.partition_log's docstring.")
    _add_log_dir_arguments(p)
    p.add_argument("--partitions", type=_partition_list, default=None, metavar="P[,P...]",
                   help="comma-separated partition ids (default: every partition found)")
    p.add_argument("--time", type=_time_spec, default=-1, metavar="TIME",
                   help="-1 or latest (default), -2 or earliest, -3 or max-timestamp, a timestamp in epoch "
                        "ms, or an ISO-8601 time (no zone: UTC): the first offset whose record timestamp is >= it")
    p.set_defaults(handler=_run_offsets)


def _run_offsets(args) -> int:
    try:
        return _offsets(args)
    except BrokenPipeError:          # the reader went away (| head): main stops quietly
        raise
    except OSError as e:
        raise KafkalogError(f"cannot read ({e.strerror or e})", path=getattr(e, "filename", None)) from None


def _offsets(args) -> int:
    import json

    found = _find_partition_dirs(args.log_dirs, args.topic, args.partitions)
    rows = []
    for partition, (path, log_dir) in found.items():
        with _open_partition(path, log_dir) as log:
            result = log.lookup(args.time, isolation=args.isolation)
            notes = list(log.notes) + list(result.notes)
        rows.append((f"{args.topic}-{partition}", partition, result, notes))
    for name, partition, result, notes in sorted(rows, key=lambda r: r[0]):   # TreeMap by TopicPartition.toString
        for note in notes:
            _warn("offsets", note)
        if args.json:
            obj = {"topic": args.topic, "partition": partition, **result.to_json()}
            _write_line(sys.stdout, json.dumps(obj, separators=(",", ":")))
        elif result.found:
            _write_line(sys.stdout, f"{args.topic}:{partition}:{result.offset}")
    sys.stdout.flush()
    return 0


def _add_fetch(subparsers) -> None:
    p = subparsers.add_parser(
        "fetch", help="print records from an offset or a time, as kafka-console-consumer would",
        description="Find where a fetch from --offset (or from the first record at or after --time) starts, "
                    "through the indexes, and print the records from there: by default one line per record "
                    "'<timestampType>:<timestamp>\\tOffset:<offset>\\t<key>\\t<value>' (kafka-console-consumer with "
                    "print.timestamp, print.offset, print.key; null is printed as null, bytes that are not UTF-8 "
                    "as \\x escapes); --json prints one object per record. Control records (transaction "
                    "markers) are skipped, as a consumer skips them. CRCs are checked.")
    _add_log_dir_arguments(p)
    p.add_argument("--partition", required=True, type=non_negative_int, metavar="P", help="REQUIRED: the partition")
    start = p.add_mutually_exclusive_group(required=True)
    start.add_argument("--offset", type=non_negative_int, metavar="N", help="the first offset to print")
    start.add_argument("--time", type=_time_spec, metavar="TIME",
                       help="start at the offset kafkalog offsets --time TIME gives (-2 earliest, -1 latest, "
                            "epoch ms or ISO-8601)")
    p.add_argument("--max-records", type=non_negative_int, default=None, metavar="K",
                   help="print at most K records (default: to the end)")
    p.set_defaults(handler=_run_fetch)


def _text(data) -> str:
    return "null" if data is None else data.decode("utf-8", "backslashreplace")


def _record_json(topic: str, row: dict, timestamp: int) -> dict:
    """A fetched record as ``kafkalog dump --json`` writes records (same key/value fields)."""
    from kafkalog.tools.dump.output import b64, utf8_or_none as utf8

    return {"topic": topic, "partition": row["partition"], "offset": row["offset"], "timestamp": timestamp,
            "timestampType": {0: "CreateTime", 1: "LogAppendTime"}.get(row["timestampType"], "NoTimestampType"),
            "leaderEpoch": row["partitionLeaderEpoch"], "key": utf8(row["key"]), "value": utf8(row["value"]),
            "key_b64": b64(row["key"]), "value_b64": b64(row["value"]),
            "headers": [{"key": h["key"], "value_b64": b64(h["value"])} for h in row["headers"]]}


def _run_fetch(args) -> int:
    try:
        return _fetch(args)
    except BrokenPipeError:          # the reader went away (| head): main stops quietly
        raise
    except OSError as e:
        raise KafkalogError(f"cannot read ({e.strerror or e})", path=getattr(e, "filename", None)) from None


def _fetch(args) -> int:
    import json

    import pyarrow as pa

    from kafkalog.lookup.rules import WHY_TEXT

    found = _find_partition_dirs(args.log_dirs, args.topic, [args.partition])
    path, log_dir = found[args.partition]
    with _open_partition(path, log_dir) as log:
        offset = args.offset
        if offset is None:
            result = log.lookup(args.time, isolation=args.isolation)
            for note in result.notes:
                _warn("fetch", note)
            if not result.found:
                _warn("fetch", f"no record to start from for --time {args.time} in {args.topic}-{args.partition}: "
                               f"{WHY_TEXT.get(result.why, result.why)}")
                return 0
            offset = result.offset
        for note in log.notes:
            _warn("fetch", note)
        left = args.max_records
        for batch in log.read_records(offset, isolation=args.isolation):
            batch = batch.filter(pa.compute.invert(batch.column("isControl")))
            if left is not None:
                batch = batch.slice(0, left)
                left -= batch.num_rows
            ts_ms = batch.column("timestamp").cast(pa.int64()).to_pylist()
            for row, ts in zip(batch.to_pylist(), ts_ms):
                if args.json:
                    obj = _record_json(args.topic, row, -1 if ts is None else ts)
                    _write_line(sys.stdout, json.dumps(obj, separators=(",", ":")))
                else:
                    kind = {0: "CreateTime", 1: "LogAppendTime"}.get(row["timestampType"])
                    stamp = "NO_TIMESTAMP" if kind is None or ts is None else f"{kind}:{ts}"
                    _write_line(sys.stdout, f"{stamp}\tOffset:{row['offset']}\t{_text(row['key'])}\t"
                                            f"{_text(row['value'])}")
            if left == 0:
                break
    sys.stdout.flush()
    return 0


# --- recover (kafkalog.log.recover) -------------------------------------------------------

def _add_recover(subparsers) -> None:
    p = subparsers.add_parser(
        "recover", help="do a broker's startup file clean-up: leftovers of compaction, splits, deletion; orphan indexes",
        description="For every partition folder of the given log dirs, do the file clean-up of a broker's startup "
                    "(LogLoader.load), in its order: delete *.deleted files; drop *.cleaned files (and *.swap files "
                    "of an incomplete operation); complete each interrupted swap by deleting the segments a .swap "
                    "replaces and renaming it; delete every .index/.timeindex/.txnindex whose .log is missing "
                    "('Found an orphaned index file ...'). Left to the broker, which does them at every startup "
                    "and needs its own state for them: recovering segments after an unclean shutdown (truncating "
                    "a corrupt tail deletes every later segment), creating a missing .timeindex, deleting all "
                    "segments when the log end is below the log start, resizing the active indexes, stray "
                    "producer snapshots and producer state. `reindex` rebuilds indexes and, with "
                    "--truncate-corrupt-tail, cuts corrupt tails keeping the cut bytes. A log dir whose .lock a "
                    "running broker holds is refused. Prints one line per partition; exit code 1 if any "
                    "partition could not be recovered.")
    p.add_argument("--log-dirs", required=True, type=file_list, metavar="DIR[,DIR...]",
                   help="REQUIRED: the comma-separated log dirs (a broker's log.dirs)")
    p.set_defaults(handler=_run_recover)


def _run_recover(args) -> int:
    from kafkalog.log.recover import recover_log_dirs

    filesystem.refuse_uris(args.log_dirs, "recover")
    for log_dir in args.log_dirs:
        check_log_dir(log_dir)
    try:
        reports = recover_log_dirs(args.log_dirs)
    except OSError as e:
        raise KafkalogError(f"cannot recover: {e.strerror or e}", path=getattr(e, "filename", None)) from None
    for report in reports:
        _write_line(sys.stdout, report.describe())
    return 1 if any(r.error for r in reports) else 0


# --- lag (kafkalog.coordinator) --------------------------------------------------------------

def _add_lag(subparsers) -> None:
    from kafkalog.tools import lag_command
    p = subparsers.add_parser(
        "lag", help="consumer groups' committed offsets and lag, from __consumer_offsets in the log dirs",
        description="For every consumer group (or those named), topic and partition: the last committed offset "
                    "as the group coordinator loads it from __consumer_offsets (latest record per key, tombstones "
                    "delete, transactional commits once committed), the partition's high watermark from the same "
                    "log dirs and the lag, as kafka-consumer-groups.sh --describe shows them. A partition not in "
                    "the log dirs is 'unknown', not 0; commits Kafka's offset expiry would remove are marked.")
    p.add_argument("--log-dirs", required=True, type=file_list, metavar="DIR[,DIR...]",
                   help="REQUIRED: the brokers' log dirs, comma-separated")
    p.add_argument("--now-ms", type=_time_spec, default=None, metavar="TIME",
                   help="'now' for the expiry column: epoch ms or ISO-8601 (default: the wall clock)")
    lag_command.add_arguments(p)
    p.set_defaults(handler=_run_lag)


def _run_lag(args) -> int:
    from kafkalog.tools import lag_command
    for log_dir in args.log_dirs:
        check_log_dir(log_dir)
    for pattern in args.group_pattern or ():
        try:
            re.compile(pattern)
        except re.error as e:
            raise UsageError(f"--group-pattern {pattern!r} is not a regular expression ({e})") from None
    return lag_command.run(args)


# --- delete-records (kafkalog.retention.delete_records) ------------------------------------------

def _add_delete_records(subparsers) -> None:
    from kafkalog.log.local_log import HW_MISSING_CHOICES, HW_MISSING_LOG_END, HW_MISSING_ZERO
    p = subparsers.add_parser(
        "delete-records", help="advance log start offsets offline, as kafka-delete-records.sh asks a broker to",
        description="Take kafka-delete-records.sh's --offset-json-file ({\"partitions\": [{\"topic\": T, "
                    "\"partition\": P, \"offset\": O}], \"version\": 1}) and advance each partition's log start "
                    "offset in the log dirs as a broker's DeleteRecords does: offset -1 means the high watermark "
                    "(replication-offset-checkpoint), an offset above it is OffsetOutOfRange, a topic whose "
                    "cleanup.policy has no delete is refused, the log start offset only moves forward. Writes "
                    "log-start-offset-checkpoint and truncates leader-epoch-checkpoint from the start; the segments "
                    "wholly below the new log start offset go at the next retention run. Every partition is "
                    "checked first: a topic-partition not in the log dirs, or any partition's error, changes "
                    "nothing. A log dir whose .lock a running broker holds is refused. Prints the low watermark "
                    "of each partition as kafka-delete-records.sh does.")
    p.add_argument("--log-dirs", required=True, type=file_list, metavar="DIR[,DIR...]",
                   help="REQUIRED: the broker's log dirs (log.dirs), comma-separated")
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help="REQUIRED: the JSON file of kafka-delete-records.sh")
    p.add_argument("--dry-run", action="store_true", help="print what would happen; change nothing")
    p.add_argument("--high-watermark-missing", choices=HW_MISSING_CHOICES, default=HW_MISSING_ZERO,
                   help=f"what a missing replication-offset-checkpoint entry means (default {HW_MISSING_ZERO}, as a "
                        f"broker: 0; {HW_MISSING_LOG_END}: the log end offset, for a backup without the file)")
    p.add_argument("--broker-config", metavar="server.properties",
                   help="the broker's server.properties (log.cleanup.policy)")
    p.add_argument("--topic-config", action="append", default=[], metavar="TOPIC:KEY=VALUE",
                   help="a per-topic override, e.g. orders:cleanup.policy=compact (repeatable)")
    p.set_defaults(handler=_run_delete_records)


def _run_delete_records(args) -> int:
    from kafkalog.config import load_configs
    from kafkalog.retention.delete_records import delete_records, describe, read_offset_json_file

    filesystem.refuse_uris(args.log_dirs, "delete-records")
    for log_dir in args.log_dirs:
        check_log_dir(log_dir)
    requests = read_offset_json_file(args.offset_json_file)
    configs = load_configs(broker_config=args.broker_config, topic_configs=args.topic_config)
    for warning in configs.warnings:
        _warn("delete-records", warning)
    try:
        results = delete_records(args.log_dirs, requests, configs=configs, hw_missing=args.high_watermark_missing,
                                 dry_run=args.dry_run)
    except OSError as e:
        raise KafkalogError(f"cannot update the log dir ({e.strerror or e})", path=getattr(e, "filename", None)) from None
    failed = any(r.error for r in results)
    _write_line(sys.stdout, "Executing records delete operation" + (" (dry run: nothing is changed)" if args.dry_run else ""))
    _write_line(sys.stdout, "Records delete operation " + ("refused, nothing changed:" if failed else
                                                          "planned:" if args.dry_run else "completed:"))
    for r in results:
        _write_line(sys.stdout, describe(r))
    sys.stdout.flush()
    return 1 if failed else 0


# --- diverge (kafkalog.tools.diverge_command) --------------------------------------------------------

def _add_diverge(subparsers) -> None:
    from kafkalog.tools import diverge_command
    diverge_command.add_parser(subparsers, file_list=file_list, topic_name=topic_name, write_line=_write_line,
                               warn=_warn)


NUMBA_CACHE_DIR = "/tmp/kafkalog-numba-cache"


def _add_offline(subparsers) -> None:     # compact, retention, configs, spark: each in its own module
    from kafkalog.tools import compact_command, configs_command, retention_command, spark_command
    for command in (compact_command, retention_command, configs_command, spark_command):
        command.add_parser(subparsers)

SUBCOMMANDS: Sequence[Callable] = (_add_dump, _add_demo, _add_offsets, _add_fetch, _add_recover, _add_lag,
                                     _add_delete_records, _add_diverge, _add_offline)


# --- main -------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog=PROG, description="Read, check and write Apache Kafka's on-disk log files as a broker does.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The console entry point: returns the exit code (0 ok, 1 bad input, 2 bad arguments)."""
    # the kernels' cache scripts/bootstrap.sh warms (kafkalog.tools.warm.DEFAULT_CACHE_DIR, as the jobs use it)
    os.environ.setdefault("NUMBA_CACHE_DIR", NUMBA_CACHE_DIR)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:           # --help/--version (0) and argument errors (2)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return args.handler(args)
    except (UsageError, OffsetOutOfRangeError) as e:     # bad arguments: nothing was done
        sys.stdout.flush()
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KafkalogError as e:
        sys.stdout.flush()
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader went away (e.g. `kafkalog dump … | head`): stop quietly, as cat does
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
