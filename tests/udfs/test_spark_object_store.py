"""The Spark side on an object store: the catalog job's report, a retention dry run and a
``format("kafkalog")`` read of an s3:// log dir equal those of its local copy; retention
--execute, compaction and reindexing refuse the URI (exit 2) and leave the bucket as it was.
Against a real S3 server (tests/s3server.py); the executors get the endpoint and credentials from
the same environment variables as the driver (here through the SparkContext's environment)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark", reason="the Spark extra is not installed (pip install -e .[spark])")

from chispa import assert_df_equality  # noqa: E402

from logdirs import make_partition, write_checkpoints  # noqa: E402
from udfs import catalog_job, compact_job, reindex_job, retention_job  # noqa: E402
from udfs.job import run  # noqa: E402

HOUR = 3_600_000
T0 = 1_700_000_000_000
NOW = T0 + 30 * 24 * HOUR
ORDER = ["topic", "partition", "offset"]


@pytest.fixture(scope="module")
def uploaded(s3_server, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("spark-object-store") / "broker-0"
    for p in range(3):
        make_partition(log_dir, "orders", p, [[T0 + d * 24 * HOUR + i * 1000 for i in range(300)] for d in range(5)])
    make_partition(log_dir, "state", 0, [[T0 + i for i in range(50)], [T0 + HOUR + i for i in range(50)]])
    write_checkpoints(log_dir, high_watermarks={("orders", p): 1500 for p in range(3)},
                      log_start_offsets={("orders", 1): 7})
    return log_dir, s3_server.upload(log_dir, "kafkalog-spark", "backup/broker-0")


@pytest.fixture
def remote_env(spark, s3_env):
    """The S3 environment for this process and for the Python workers Spark starts from now on."""
    from udfs.kafkalog_source import register
    environment = spark.sparkContext.environment
    saved = dict(environment)
    environment.update(s3_env.environment())
    register(spark)                  # a Python data source takes the environment it is registered with
    yield s3_env
    environment.clear()
    environment.update(saved)
    register(spark)


def _bucket_files(server, uri: str) -> dict:
    from pyarrow import fs
    infos = server.filesystem().get_file_info(fs.FileSelector(uri[len("s3://"):], recursive=True))
    return {i.path: (i.size, i.mtime_ns) for i in infos if i.type == fs.FileType.File}


def _without_location(report: dict, location: str) -> dict:
    """The report with the log dir's location (either spelling of a URI: s3://b/k, or s3:/b/k as a
    path joined with pathlib prints it) and the run's identity taken out."""
    text = json.dumps(report).replace(location, "<dir>").replace(location.replace("://", ":/", 1), "<dir>")
    return _without_timings(json.loads(text))


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items()
                if k not in ("run_id", "run_at_ms", "duration_s", "duration_ms", "stage_s")}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _reports_here_and_there(spark, job, argv, uploaded, tmp_path) -> list:
    """The job's JSON report on the local copy and on the URI, each without location and timings."""
    reports = []
    for where in (str(uploaded[0]), uploaded[1]):
        path = tmp_path / f"report-{len(reports)}.json"
        assert job.main(["--log-dirs", where, *argv, "--report", str(path)], spark=spark) == 0
        reports.append(_without_location(json.loads(path.read_text()), where))
    return reports


def test_catalog_report_of_s3_equals_local(spark, remote_env, uploaded, tmp_path):
    reports = _reports_here_and_there(spark, catalog_job, ["--dry-run"], uploaded, tmp_path)
    for report in reports:                   # ages count from each run's clock
        report.pop("age_histogram", None)
    assert reports[1] == reports[0]
    assert reports[0]["summary"]["segments"] == 17


def test_reports_and_pages_can_be_written_to_a_uri(spark, remote_env, uploaded):
    from kafkalog.fs import filesystem
    _local, uri = uploaded
    report, page = "s3://kafkalog-spark/reports/run-1/catalog.json", "s3://kafkalog-spark/reports/run-1/catalog.html"
    assert catalog_job.main(["--log-dirs", uri, "--dry-run", "--report", report, "--html", page], spark=spark) == 0
    written = json.loads(filesystem.read_bytes(report))
    assert written["summary"]["segments"] == 17 and written["log_dirs"] == [uri]
    assert filesystem.read_bytes(page).startswith(b"<!DOCTYPE html>")


def test_retention_dry_run_on_s3_equals_local(spark, remote_env, uploaded, tmp_path):
    reports = _reports_here_and_there(spark, retention_job, ["--now-ms", str(NOW)], uploaded, tmp_path)
    assert reports[1] == reports[0]
    assert reports[0]["summary"]["segments_deleted"] > 0


@pytest.mark.parametrize("options", [{}, {"subscribe": "orders", "startingOffsets": '{"orders":{"0":450,"1":-2,"2":1200}}',
                                          "endingOffsets": '{"orders":{"0":900,"1":-1,"2":1300}}'},
                                     {"subscribe": "state", "includeHeaders": "true"},
                                     {"subscribe": "orders", "startingTimestamp": str(T0 + 2 * 24 * HOUR), "endingTimestamp":
                                      str(T0 + 3 * 24 * HOUR + 5000)}])
def test_data_source_read_of_s3_equals_local(spark, remote_env, uploaded, options):
    local, uri = uploaded

    def read(where):
        reader = spark.read.format("kafkalog")
        for k, v in options.items():
            reader = reader.option(k, v)
        return reader.load(where).orderBy(*ORDER)

    expected = read(str(local))
    assert expected.count() > 0
    assert_df_equality(read(uri), expected)


@pytest.mark.parametrize("job,argv", [(retention_job, ["--execute", "--now-ms", str(NOW)]),
                                      (compact_job, ["--topic-config", "state:cleanup.policy=compact"]),
                                      (reindex_job, [])])
def test_modifying_jobs_refuse_a_uri_and_touch_nothing(spark, remote_env, uploaded, capsys, job, argv):
    _local, uri = uploaded
    before = _bucket_files(remote_env, uri)
    code = run(job.JOB, lambda a: job.main(a, spark=spark), ["--log-dirs", uri, *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert "no atomic rename" in err and uri in err and "Traceback" not in err
    assert _bucket_files(remote_env, uri) == before


def test_reindex_verify_only_runs_on_a_uri(spark, remote_env, uploaded, tmp_path):
    reports = _reports_here_and_there(spark, reindex_job, ["--verify-only"], uploaded, tmp_path)
    assert reports[1] == reports[0]


def test_compact_dry_run_on_s3_equals_local(spark, remote_env, uploaded, tmp_path):
    reports = _reports_here_and_there(spark, compact_job, ["--dry-run", "--now-ms", str(NOW), "--topic-config",
                                                           "state:cleanup.policy=compact"], uploaded, tmp_path)
    assert reports[1] == reports[0]


def test_lookup_job_on_s3_equals_local(spark, remote_env, uploaded, tmp_path):
    from udfs import lookup_job
    local, uri = uploaded
    queries = tmp_path / "queries.csv"
    queries.write_text("id,topic,partition,timestamp,offset\n"
                       + "".join(f"{i},orders,{i % 3},{T0 + i * 7 * HOUR},\n" for i in range(10))
                       + "".join(f"o{i},orders,{i % 3},,{i * 111}\n" for i in range(10)))
    answers = []
    for where in (str(local), uri):
        out = tmp_path / f"answers-{len(answers)}.json"
        assert lookup_job.main(["--log-dirs", where, "--queries", str(queries), "--output-json", str(out)],
                               spark=spark) == 0
        answers.append(sorted(out.read_text().replace(where, "<dir>").replace(where.replace("://", ":/", 1), "<dir>")
                              .splitlines()))
    assert answers[1] == answers[0] and len(answers[0]) == 20
