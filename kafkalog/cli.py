"""The ``kafkalog`` command: one subcommand per task.

Adding a subcommand takes one ``_add_<name>(subparsers)`` function that builds its parser and sets
``handler`` to a ``(args) -> int`` function, listed in ``SUBCOMMANDS``. ``main`` does the rest:
argument errors exit 2 with argparse's message, a :class:`~kafkalog.errors.KafkalogError` that
reaches it prints ``kafkalog <command>: error: <message>`` on stderr and exits 1, and no input
ever produces a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Callable, List, Optional, Sequence

from . import __version__
from .errors import KafkalogError

PROG = "kafkalog"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


# --- argument types ---------------------------------------------------------------------------

def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _file_list(text: str) -> List[str]:
    """kafka-dump-log's comma-separated --files (empty items are dropped)."""
    files = [f for f in text.split(",") if f]
    if not files:
        raise argparse.ArgumentTypeError("no file names given")
    return files


# --- output -----------------------------------------------------------------------------------

def _write_line(stream, text: str) -> None:
    """Write one line; characters the stream's encoding cannot hold are escaped, not fatal."""
    try:
        stream.write(text + "\n")
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding) + "\n")


# --- dump -------------------------------------------------------------------------------------

def _add_dump(subparsers) -> None:
    p = subparsers.add_parser(
        "dump", help="print segment, index and snapshot files as kafka-dump-log.sh does",
        description="Print the contents of Kafka log files line for line as kafka-dump-log.sh "
                    "(kafka.tools.DumpLogSegments) prints them: .log (and raw record sets named *.bin), "
                    ".index, .timeindex, .txnindex, .snapshot, KRaft .checkpoint. Problems are reported on "
                    "stderr with the file and byte position, and make the exit code 1; the dump goes on "
                    "with the next batch or file.")
    p.add_argument("--files", required=True, type=_file_list, metavar="FILE[,FILE...]",
                   help="REQUIRED: the comma-separated list of data and index files to dump")
    p.add_argument("--deep-iteration", action="store_true",
                   help="iterate records, not only batches (implied by --print-data-log)")
    p.add_argument("--print-data-log", action="store_true",
                   help="print each record's key and payload (as UTF-8 text)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the log without printing them")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only run the index sanity check (Kafka's CorruptIndexException rules)")
    p.add_argument("--max-bytes", type=_non_negative_int, default=None, metavar="N",
                   help="read at most N bytes of each record file (default: all)")
    p.add_argument("--max-message-size", type=_positive_int, default=None, metavar="N",
                   help="bytes read at an offset-index position to find its batch (default: 5242880)")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="with --print-data-log, print only '| key: … payload: …' per record")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line instead of Kafka's text (schema: kafkalog.dump docstring)")
    p.set_defaults(handler=_run_dump)


def _run_dump(args) -> int:
    from .dump import DEFAULT_MAX_MESSAGE_SIZE, STDOUT, DumpOptions, Dumper

    options = DumpOptions(
        deep_iteration=args.deep_iteration, print_data_log=args.print_data_log,
        verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
        max_bytes=args.max_bytes,
        max_message_size=DEFAULT_MAX_MESSAGE_SIZE if args.max_message_size is None else args.max_message_size,
        skip_record_metadata=args.skip_record_metadata, json=args.json)
    dumper = Dumper(options, prog=f"{PROG} dump")
    for line in dumper.dump_files(args.files):
        if line.stream == STDOUT:
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
    p.add_argument("out", help="directory to write")
    p.add_argument("--partitions", type=_positive_int, default=3, metavar="N", help="partitions (default: 3)")
    p.add_argument("--records", type=_non_negative_int, default=20000, metavar="N",
                   help="records per partition (default: 20000)")
    p.add_argument("--compression", choices=CODECS, default="none", help="codec of the batches (default: none)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    p.set_defaults(handler=_run_demo)


def _run_demo(args) -> int:
    try:
        demo = importlib.import_module("kafkalog.demo")
    except ModuleNotFoundError as e:
        if e.name != "kafkalog.demo":
            raise
        print(f"{PROG} demo: error: the demo is not available in this installation (no module kafkalog.demo)",
              file=sys.stderr)
        return 2
    code = demo.main(args)
    return 0 if code is None else int(code)


# --- recover (kafkalog.cleaner.recover) -------------------------------------------------------

def _add_recover(subparsers) -> None:
    p = subparsers.add_parser(
        "recover", help="finish or roll back interrupted compaction swaps as a broker's startup does",
        description="For every partition folder of the given log dirs, do what a broker's startup does with "
                    "compaction leftovers (LogLoader): delete *.deleted files, drop *.cleaned files (and *.swap "
                    "files of an incomplete operation), then complete each interrupted swap by deleting the "
                    "segments a .swap replaces and renaming it. A log dir whose .lock a running broker holds is "
                    "refused. Prints one line per partition; exit code 1 if any partition could not be recovered.")
    p.add_argument("--log-dirs", required=True, type=_file_list, metavar="DIR[,DIR...]",
                   help="REQUIRED: the comma-separated log dirs (a broker's log.dirs)")
    p.set_defaults(handler=_run_recover)


def _run_recover(args) -> int:
    from .cleaner.recover import recover_log_dirs

    try:
        reports = recover_log_dirs(args.log_dirs)
    except OSError as e:
        raise KafkalogError(f"cannot recover: {e.strerror or e}", path=getattr(e, "filename", None)) from None
    for report in reports:
        _write_line(sys.stdout, report.describe())
    return 1 if any(r.error for r in reports) else 0


# --- main -------------------------------------------------------------------------------------

SUBCOMMANDS: Sequence[Callable] = (_add_dump, _add_demo, _add_recover)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Read, check and write Apache Kafka's on-disk log files as a broker does.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The console entry point: returns the exit code (0 ok, 1 bad input, 2 bad arguments)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:           # --help/--version (0) and argument errors (2)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    try:
        return args.handler(args)
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
