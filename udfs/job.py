"""What every spark-submit job shares: its command line (``--log-dirs``, ``--report``, Kafka configs,
``--master``, ``--delta-engine``), exit codes, the JSON report and progress lines.

Exit codes: 0 done; 1 done, but some partitions or log dirs failed (the report says which); 2 bad
arguments or configuration (nothing was touched); 3 the job itself failed (Spark or a worker died: the
traceback, then one line saying what to do next). Errors are one line naming what is wrong and what to
do — never a traceback for bad input.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

from kafkalog.durable import AS_CREATED, ownership_problem, replace_file
from kafkalog.cli import _non_negative_int as _non_negative  # noqa: F401 - the jobs' argument type too
from kafkalog.config import KafkaConfigs, load_configs
from kafkalog.errors import ConfigError, KafkalogError, LogDirLockedError
from kafkalog.logdir import describe_lock_holder, is_locked, lock_log_dir

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3


class UsageError(Exception):
    """Bad arguments: exit 2 with the message."""


class JobArgumentParser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so ``run`` owns the exit code."""

    def error(self, message: str):   # type: ignore[override]
        raise UsageError(f"{message} (see --help)")


def _log_dir_list(text: str) -> list[str]:
    dirs = [d for d in text.split(",") if d]
    if not dirs:
        raise argparse.ArgumentTypeError("no log dir given")
    return dirs


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 date-time (UTC unless it names a zone)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither epoch milliseconds nor an ISO-8601 time such as 2026-11-21T03:00:00Z") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return int(value.timestamp() * 1000)


def base_parser(job: str, description: str, *, epilog: Optional[str] = None) -> JobArgumentParser:
    parser = JobArgumentParser(prog=f"spark-submit.sh {job}", description=description, epilog=epilog,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log-dirs", action="append", type=_log_dir_list, metavar="DIR[,DIR...]",
                        help="Kafka log dirs to work on (repeatable or comma-separated; default: log.dirs of "
                             "--broker-config)")
    parser.add_argument("--report", metavar="PATH", help="write a machine-readable JSON report here")
    parser.add_argument("--master", metavar="URL", help="Spark master (default: $SPARK_MASTER, else local[*])")
    parser.add_argument("--delta-engine", choices=("auto", "spark", "rs"), default="auto",
                        help="Delta writer: delta-spark when the session has it (auto), or delta-rs (rs)")
    return parser


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Kafka configuration (precedence: topic override > broker > Kafka default)")
    group.add_argument("--broker-config", metavar="server.properties",
                       help="the brokers' server.properties: log.retention.*, log.cleanup.policy, log.dirs, …")
    group.add_argument("--topic-config", action="append", default=[], metavar="TOPIC:KEY=VALUE",
                       help="a per-topic override, e.g. orders:retention.ms=3600000 (repeatable)")
    group.add_argument("--topic-config-file", action="append", default=[], metavar="TOPIC:PATH",
                       help="a .properties file of topic configs for TOPIC (repeatable)")


def load_job_configs(args) -> KafkaConfigs:
    configs = load_configs(broker_config=args.broker_config, topic_configs=args.topic_config,
                           topic_config_files=args.topic_config_file)
    for warning in configs.warnings:
        progress(f"warning: {warning}")
    return configs


def resolve_log_dirs(args, configs: Optional[KafkaConfigs] = None) -> list[Path]:
    """--log-dirs, else the broker config's log.dirs; each must be an existing folder."""
    dirs = [d for group in (args.log_dirs or []) for d in group]
    if not dirs and configs is not None and getattr(args, "broker_config", None):
        dirs = list(configs.broker.log_dirs)
    if not dirs:
        raise UsageError("give --log-dirs DIR[,DIR...] (or --broker-config with log.dirs)")
    paths = []
    for d in dirs:
        path = Path(d)
        if not path.is_dir():
            raise UsageError(f"log dir {d} does not exist or is not a folder")
        if any(path.resolve() == p.resolve() for p in paths):
            raise UsageError(f"log dir {d} is given twice")
        paths.append(path)
    return paths


class JobStart(NamedTuple):
    """What a log-dir job works out before it touches a log dir."""
    args: argparse.Namespace
    configs: KafkaConfigs
    log_dirs: list
    now: int               # --now-ms when the job has it and it was given, else the clock
    run_id: str
    run_at: int            # wall clock at the start, ms
    started: float         # time.monotonic() at the start, for the report's duration


def start_job(parser: argparse.ArgumentParser, argv: Sequence[str], check=None) -> JobStart:
    """Parse ``argv`` (then ``check(args)``, which raises UsageError), load the configs and resolve
    the log dirs."""
    args = parser.parse_args(argv)
    if check is not None:
        check(args)
    configs = load_job_configs(args)
    log_dirs = resolve_log_dirs(args, configs)
    run_at = now_ms()
    now = getattr(args, "now_ms", None)
    return JobStart(args, configs, log_dirs, run_at if now is None else now, uuid.uuid4().hex, run_at,
                    time.monotonic())


@contextmanager
def locked_log_dirs(log_dirs, *, modifying: bool, read_only_note: str):
    """Yield (usable, refused) log dirs. A log dir whose ``.lock`` a live process (a broker) holds is
    refused when the job modifies files — ``refused`` holds {"log_dir", "message"} — and only warned
    about otherwise (``read_only_note`` says what the job does instead). When modifying, this process
    holds every usable dir's lock until the block ends, so no broker starts on it meanwhile."""
    refused, usable = [], []
    for log_dir in log_dirs:
        if is_locked(log_dir):
            message = f"{log_dir}: its .lock is held by {describe_lock_holder(log_dir)}"
            if modifying:
                refused.append(dict(log_dir=str(log_dir),
                                    message=f"{message}; refused. {LogDirLockedError.default_hint}"))
                progress(f"error: {message}; refused")
                continue
            progress(f"warning: {message}; {read_only_note}")
        if modifying:
            problem = _write_problem(log_dir)
            if problem is not None:
                refused.append(dict(log_dir=str(log_dir), message=f"{problem}; refused, nothing changed"))
                progress(f"error: {problem}; refused")
                continue
        usable.append(log_dir)
    with ExitStack() as locks:
        if modifying:
            for log_dir in usable:
                locks.enter_context(lock_log_dir(log_dir))
        yield usable, refused


def _write_problem(log_dir) -> Optional[str]:
    """Why a modifying job may not change ``log_dir`` (None when it may): files it cannot give their
    owners' uid and gid (``kafkalog.durable.ownership_problem``), or a dir it cannot read."""
    try:
        return ownership_problem(log_dir)
    except OSError as exc:
        return f"{exc.filename or log_dir}: {exc.strerror or exc}"


def progress(message: str) -> None:
    """One progress line on stderr (stdout carries the human summary)."""
    print(f"[kafkalog {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write_report(path: Optional[str], report: dict) -> None:
    if not path:
        return
    data = json.dumps(report, indent=2, sort_keys=False, default=_json_default).encode("utf-8") + b"\n"
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, data, owner=AS_CREATED)      # a user's file, not a log dir's: no owner copied
    progress(f"report written to {target}")


def _json_default(value):
    if isinstance(value, (datetime,)):
        return value.isoformat()
    if isinstance(value, Path):
        return os.fspath(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def run(job: str, main: Callable[[Sequence[str]], int], argv: Optional[Sequence[str]] = None) -> int:
    """Run a job's ``main`` and turn failures into exit codes and one-line messages."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return main(argv)
    except UsageError as exc:
        print(f"spark-submit.sh {job}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as exc:
        print(f"spark-submit.sh {job}: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KafkalogError as exc:
        print(f"spark-submit.sh {job}: error: {exc}", file=sys.stderr)
        return EXIT_PARTIAL
    except SystemExit as exc:     # --help
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_OK
    except Exception as exc:      # a Spark or worker failure (e.g. out of memory): say what to do next
        import traceback
        traceback.print_exc()
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"spark-submit.sh {job}: failed: {type(exc).__name__}: {first}\n"
              f"  Partitions already applied stay applied and consistent; an interrupted compaction swap is "
              f"finished by `kafkalog recover --log-dirs …` (or a broker's startup). Fix the cause above and run "
              f"the job again: it plans from what is on disk.", file=sys.stderr)
        return EXIT_FAILED


def now_ms() -> int:
    return time.time_ns() // 1_000_000
