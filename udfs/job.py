"""What every spark-submit job shares: its command line (``--log-dirs``, ``--report``, Kafka configs,
``--master``, ``--delta-engine``), exit codes, the JSON report and progress lines.

Exit codes: 0 done; 1 done, but some partitions or log dirs failed (the report says which); 2 bad
arguments or configuration (nothing was touched); 3 the job itself failed (Spark or a worker died: the
traceback, then one line saying what to do next); 130 / 143 stopped by SIGINT (Ctrl-C) / SIGTERM
(``udfs.interrupts``: what finished is reported, one line says what to do). Errors are one line naming
what is wrong and what to do — never a traceback for bad input.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

from kafkalog.fs.durable import AS_CREATED, ownership_problem, replace_file
from kafkalog.config import TOPIC_NOT_HELD_HINT, KafkaConfigs, load_configs, topics_not_held
from kafkalog.engine import resolve as resolve_engine
from kafkalog.errors import ConfigError, KafkalogError, UsageError
from kafkalog.fs import filesystem
from kafkalog.fs.lock import holder_and_hint, is_locked, lock_log_dir
from kafkalog.lookup.time_spec import parse_epoch_ms
from kafkalog.tools.arguments import check_log_dir

from udfs import interrupts, progress as _progress

EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3


# Jobs that delete or rewrite log files: there a config key that is not Kafka's (a misspelt
# retention.ms would silently fall back to the default) is an error, dry runs included. Read-only
# runs (catalog, reindex --verify-only) warn instead: nothing they do can lose data, and they stay
# usable with a newer broker's server.properties whose log.* keys kafkalog does not know yet.
REWRITING_JOBS = frozenset(("retention", "compact", "reindex"))


class JobArgumentParser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so ``run`` owns the exit code, and that
    never accepts an abbreviated option: ``--exec`` must not run ``--execute``."""

    def __init__(self, *args, job: Optional[str] = None, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self.job = job

    def error(self, message: str):   # type: ignore[override]
        raise UsageError(f"{message} (see --help)")


def _log_dir_list(text: str) -> list[str]:
    dirs = [d for d in text.split(",") if d]
    if not dirs:
        raise argparse.ArgumentTypeError("no log dir given")
    return dirs


def report_path(text: str) -> str:
    """``--report``: a file to (re)write; an existing folder there is refused before the job starts."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a folder; give the path of a .json file to write")
    return text


def table_path(text: str) -> str:
    """A Delta table a job writes or appends to: a new or empty folder, or an existing Delta table
    (a folder with ``_delta_log``). A file, or a folder holding something else, is refused before the
    job starts: the job would write Parquet files and a log into it."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; give a folder for the Delta table")
    if path.is_dir() and not (path / "_delta_log").is_dir() and any(path.iterdir()):
        raise argparse.ArgumentTypeError(f"{text} is a folder holding other files, not a Delta table; give a new "
                                         "folder name or an existing Delta table")
    return text


def parse_time_ms(text: str) -> int:
    """``--now-ms``: epoch milliseconds, or an ISO-8601 date-time (UTC unless it names a zone)."""
    try:
        return parse_epoch_ms(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def base_parser(job: str, description: str, *, epilog: Optional[str] = None) -> JobArgumentParser:
    parser = JobArgumentParser(prog=f"spark-submit.sh {job}", description=description, epilog=epilog,
                               formatter_class=argparse.RawDescriptionHelpFormatter, job=job)
    parser.add_argument("--log-dirs", action="append", type=_log_dir_list, metavar="DIR[,DIR...]",
                        help="Kafka log dirs to work on (repeatable or comma-separated; default: log.dirs of "
                             "--broker-config)")
    parser.add_argument("--report", metavar="PATH", type=report_path, help="write a machine-readable JSON report here")
    parser.add_argument("--master", metavar="URL", help="Spark master (default: $SPARK_MASTER, else local[*])")
    parser.add_argument("--delta-engine", choices=("auto", "spark", "rs"), default="auto",
                        help="Delta writer: delta-spark when the session has it (auto), or delta-rs (rs)")
    return parser


def add_html_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--html", metavar="PATH",
                        help="also write the report as one self-contained HTML page with charts (opens offline)")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Kafka configuration (precedence: topic override > broker > Kafka default)")
    group.add_argument("--broker-config", metavar="server.properties",
                       help="the brokers' server.properties: log.retention.*, log.cleanup.policy, log.dirs, …")
    group.add_argument("--topic-config", action="append", default=[], metavar="TOPIC:KEY=VALUE",
                       help="a per-topic override, e.g. orders:retention.ms=3600000 (repeatable)")
    group.add_argument("--topic-config-file", action="append", default=[], metavar="TOPIC:PATH",
                       help="a .properties file of topic configs for TOPIC (repeatable)")
    group.add_argument("--describe-configs", action="store_true",
                       help="print every topic's effective configs and where each came from (as kafka-configs.sh "
                            "--describe --all; same as `kafkalog configs --describe`), then stop: nothing is run")
    group.add_argument("--allow-absent-topic-configs", action="store_true",
                       help="let --topic-config/--topic-config-file name topics these log dirs do not hold (one "
                            "set of overrides for a whole cluster, run broker by broker); they are listed as "
                            "warnings. Without it a job that deletes or rewrites refuses such a topic")


def strict_configs(job: Optional[str], args) -> bool:
    """Whether unknown config keys are errors for this run (see REWRITING_JOBS)."""
    return job in REWRITING_JOBS and not getattr(args, "verify_only", False)


def load_job_configs(args, *, strict: bool = False) -> KafkaConfigs:
    configs = load_configs(broker_config=args.broker_config, topic_configs=args.topic_config,
                           topic_config_files=args.topic_config_file, strict=strict)
    for warning in configs.warnings:
        progress(f"warning: {warning}")
    return configs


def topics_of_log_dirs(log_dirs) -> set[str]:
    """The topics of the partition folders directly inside ``log_dirs``."""
    from udfs.partitions import list_partition_folders, topic_of_folder

    return {t for t in (topic_of_folder(folder) for _d, folder in list_partition_folders(log_dirs)) if t}


def check_topic_configs(args, configs: KafkaConfigs, held: set[str], *, strict: bool,
                        held_in: str = "the log dirs") -> None:
    """A topic named in ``--topic-config``/``--topic-config-file`` that is not in ``held`` (the topics the
    job's input holds): a ConfigError (exit 2, before anything is touched) when ``strict`` — the jobs that
    delete or rewrite, dry runs included — unless ``--allow-absent-topic-configs``; a warning otherwise.

    :param args: the parsed command line (for ``allow_absent_topic_configs``)
    :param configs: the loaded configs
    :param held: the topics the job's log dirs (or, for restore, its table) hold
    :param strict: whether the job deletes or rewrites (see ``strict_configs``)
    :param held_in: what holds ``held``, for the message
    """
    messages = topics_not_held(configs, held, held_in=held_in)
    if not messages:
        return
    if strict and not getattr(args, "allow_absent_topic_configs", False):
        raise ConfigError("; ".join(messages), hint=f"{TOPIC_NOT_HELD_HINT}; --allow-absent-topic-configs lets one "
                          "set of overrides cover topics held elsewhere")
    for message in messages:
        progress(f"warning: {message}; ignored")


def resolve_log_dirs(args, configs: Optional[KafkaConfigs] = None) -> list[Path]:
    """--log-dirs, else the broker config's log.dirs; each must be an existing folder. Returned as
    absolute paths: Spark's Python workers need not share the driver's working directory."""
    dirs = [d for group in (args.log_dirs or []) for d in group]
    if not dirs and configs is not None and getattr(args, "broker_config", None):
        dirs = list(configs.broker.log_dirs)
    if not dirs:
        raise UsageError("give --log-dirs DIR[,DIR...] (or --broker-config with log.dirs)")
    paths = []
    for d in dirs:
        check_log_dir(d)
        path = Path(d) if filesystem.is_uri(d) else Path(os.path.abspath(d))
        if any(path == p if filesystem.is_uri(d) else path.resolve() == p.resolve() for p in paths):
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
    resolve_engine()              # a bad KAFKALOG_ENGINE is a usage error here, not one per partition later
    strict = strict_configs(getattr(parser, "job", None), args)
    configs = load_job_configs(args, strict=strict)
    log_dirs = resolve_log_dirs(args, configs)
    if getattr(args, "describe_configs", False):        # what the job would use, before it runs
        from kafkalog.config_describe import describe_configs, describe_lines
        topics = topics_of_log_dirs(log_dirs) | set(configs.topic_named_in)
        print("\n".join(describe_lines(describe_configs(configs, topics))))
        raise SystemExit(0)
    check_topic_configs(args, configs, topics_of_log_dirs(log_dirs), strict=strict)
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
            who, hint = holder_and_hint(log_dir)      # another kafkalog job, a broker, or unknown: its own hint
            message = f"{log_dir}: its .lock is held by {who}"
            if modifying:
                refused.append(dict(log_dir=str(log_dir), message=f"{message}; refused. {hint}"))
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
    owners' uid and gid (``kafkalog.fs.durable.ownership_problem``), or a dir it cannot read."""
    try:
        return ownership_problem(log_dir)
    except OSError as exc:
        return f"{exc.filename or log_dir}: {exc.strerror or exc}"


def progress(message: str) -> None:
    """One progress line on stderr (stdout carries the human summary)."""
    _progress.message(message)


def write_report(path: Optional[str], report: dict) -> None:
    if not path:
        return
    data = json.dumps(report, indent=2, sort_keys=False, default=_json_default).encode("utf-8") + b"\n"
    if filesystem.is_uri(path):
        filesystem.write_object(path, data)
        progress(f"report written to {filesystem.uri_for_display(path)}")
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, data, owner=AS_CREATED)      # a user's file, not a log dir's: no owner copied
    progress(f"report written to {target}")


def write_html(path: Optional[str], report: dict) -> None:
    """The report as an HTML page (``kafkalog.report_html``), written atomically; prints its size."""
    if not path:
        return
    from kafkalog.report_html import render_page

    data = render_page(report).encode("utf-8")
    target = path if filesystem.is_uri(path) else Path(path)
    try:
        if filesystem.is_uri(path):
            filesystem.write_object(path, data)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            replace_file(target, data, owner=AS_CREATED)   # a user's file, not a log dir's
    except OSError as exc:
        raise KafkalogError(f"cannot write the HTML page: {exc.strerror or exc}", path=target,
                            hint="the job's work and its JSON report are not affected") from None
    progress(f"HTML page written to {target} ({len(data) / 1e6:.1f} MB)")


def _json_default(value):
    if isinstance(value, (datetime,)):
        return value.isoformat()
    if isinstance(value, Path):
        return os.fspath(value)
    if isinstance(value, (set, tuple)):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def run(job: str, main: Callable[[Sequence[str]], int], argv: Optional[Sequence[str]] = None) -> int:
    """Run a job's ``main`` and turn failures into exit codes and one-line messages; SIGINT and
    SIGTERM stop it cleanly (``udfs.interrupts``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    handlers = interrupts.install()
    try:
        try:
            code = _run_main(job, main, argv)
        except (interrupts.JobInterrupted, KeyboardInterrupt):
            code = None
        if interrupts.received() is None:
            if code is not None:
                return code
            interrupts.mark(signal.SIGINT)          # a KeyboardInterrupt our handler did not see
        if code is None:
            _report_interrupted(job, argv)
        return interrupts.finish(job, code, report=interrupts.report_option(argv))
    finally:
        interrupts.restore(handlers)


def _report_interrupted(job: str, argv: Sequence[str]) -> None:
    """After a signal, the report a job did not write itself: each folder of its last progress
    counter, finished (with what it reported, when it did) or interrupted."""
    path = interrupts.report_option(argv)
    if not path or interrupts.noted_report():
        return
    counter = _progress.latest_counter()
    finished = {} if counter is None else dict(counter.finished())
    folders = [] if counter is None else counter.folders
    partitions = [dict(log_dir=d, partition_dir=f, status="finished" if f in finished else "interrupted")
                  for d, f in folders]
    done = sum(p["status"] == "finished" for p in partitions)
    report = dict(job=job, interrupted=dict(signal=interrupts.signal_name(), what=counter.what if counter else None,
                                            finished=done, total=len(folders)), partitions=partitions)
    try:
        write_report(path, report)
    except (OSError, KafkalogError):
        return
    interrupts.note_finished(done, len(folders), "finished", report=path) if folders else interrupts.note_report(path)


def _run_main(job: str, main: Callable[[Sequence[str]], int], argv: list) -> Optional[int]:
    try:
        with _progress.watch():
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
        if interrupts.received() is not None:         # a job cancelled by SIGINT/SIGTERM: run() says so
            return None
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
