"""The jobs' ``--html`` pages (kafkalog.report_html), rendered in headless Chromium: each page loads
without console errors, every chart is drawn, the numbers it shows are the JSON report's, its tables
hold every partition, and a screenshot is written under the test's tmp dir. On the demo log dir and
small compacted log dirs through the real jobs, on a 10,000-partition log dir through the retention
and catalog jobs, and on generated reports of 10,000 and 100,000 partitions (page size bounded)."""
from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="plotly (the spark extra) is not installed: pip install -e .[spark]")

from kafkalog.report_html import compaction_page, render_page, retention_page  # noqa: E402
from kafkalog.report_html.page import ROWS_PER_PAGE  # noqa: E402
from kafkalog.report_html.retention import TIMELINE_PARTITIONS_MAX, TIMELINE_SEGMENT_BUDGET  # noqa: E402

from browser import Browser, chromium_or_skip  # noqa: E402
from logdirs import make_partition  # noqa: E402

T0 = 1_767_225_600_000            # 2026-01-01T00:00Z
HOUR, DAY = 3_600_000, 86_400_000
NOW = T0 + 7 * DAY + 3 * HOUR
OPEN_SECONDS_MAX = 10.0           # "opens in a few seconds"; generous for a loaded 2-core CI machine
PAGE_BYTES_MAX_100K = 40_000_000  # 100,000 partitions: tens of MB at most, never hundreds


@pytest.fixture(scope="module")
def browser():
    with Browser(chromium_or_skip()) as b:
        yield b


# --- checks every page gets ----------------------------------------------------------------------

def lookup(report: dict, key: str):
    value = report
    for part in key.split("."):
        value = value[part]
    return value


def raw(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


CHARTS_JS = """[...document.querySelectorAll('div.chart')].filter(d => d.style.display !== 'none').map(d => ({
  name: d.dataset.chart, plotly: d.classList.contains('js-plotly-plot'), svg: d.querySelectorAll('.main-svg').length,
  traces: d.querySelectorAll('g.trace').length,
  marks: d.querySelectorAll('g.trace path.point, g.trace path.js-line, g.trace .point path, g.trace path').length,
  points: (d.data || []).reduce((n, t) => n + ((t.y || t.x || []).length), 0)}))"""
NUMBERS_JS = """[...document.querySelectorAll('[data-key]')].map(e => [e.dataset.key, e.dataset.value, e.textContent])"""


def check_page(browser: Browser, path: Path, report: dict, screenshot: Path, *, expect_charts: set,
               allow_empty_charts: bool = False) -> dict:
    """Open the page; assert no console error, every chart drawn (with marks, unless
    ``allow_empty_charts``: a report with nothing to chart), every number the report's; save a
    screenshot. Returns facts for further checks."""
    size = path.stat().st_size
    started = time.monotonic()
    errors = browser.open(path)
    opened = time.monotonic() - started
    print(f"\n{path.name}: {size / 1e6:.2f} MB, opened and drawn in {opened:.2f} s")
    assert errors == [], errors
    assert opened < OPEN_SECONDS_MAX, f"{path.name} took {opened:.1f} s to open"

    charts = {c["name"]: c for c in browser.evaluate(CHARTS_JS)}
    assert expect_charts <= set(charts), f"missing charts: {expect_charts - set(charts)}"
    for name, c in charts.items():
        assert c["plotly"] and c["svg"] >= 1, f"chart {name} not drawn: {c}"
        if not allow_empty_charts:
            assert c["traces"] >= 1 and c["marks"] >= 1 and c["points"] >= 1, f"chart {name} drew nothing: {c}"

    numbers = browser.evaluate(NUMBERS_JS)
    assert numbers, "the page shows no summary numbers"
    for key, value, text in numbers:
        expected = lookup(report, key)
        assert value == raw(expected), (key, value, expected)
        if isinstance(expected, int) and not isinstance(expected, bool):
            assert int(text.replace(",", "")) == expected, (key, text, expected)

    shot = browser.screenshot(screenshot)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    return dict(charts=charts, size=size, opened=opened)


def chart_y(browser: Browser, chart: str) -> list:
    """Every trace's y values of a chart, as plotly holds them after drawing."""
    return browser.evaluate(f"document.querySelector('[data-chart=\"{chart}\"]').data.map(t => Array.from(t.y))")


def table_rows(browser: Browser, table: str, query: str = "") -> int:
    return browser.evaluate(f"(t => (t.search({json.dumps(query)}), t.shown()))(window.kafkalogTables[{json.dumps(table)}])")


# --- real jobs -----------------------------------------------------------------------------------

def test_demo_catalog_and_retention_pages_from_the_jobs(spark, tmp_path, browser):
    from kafkalog.tools.demo import generate_demo_log_dir
    from udfs import catalog_job, retention_job

    logs = tmp_path / "demo-logs"
    generate_demo_log_dir(logs, partitions=3, records=20_000)

    args = ["--log-dirs", str(logs), "--dry-run", "--report", str(tmp_path / "catalog.json"),
            "--html", str(tmp_path / "catalog.html")]
    assert catalog_job.main(args, spark=spark) == 0
    catalog = json.loads((tmp_path / "catalog.json").read_text())
    assert sum(t["segments"] for t in catalog["topics"].values()) == catalog["summary"]["segments"]
    assert sum(b["segments"] for b in catalog["size_histogram"]) == catalog["summary"]["segments"]
    assert sum(b["segments"] for b in catalog["age_histogram"]) == catalog["summary"]["segments"]
    check_page(browser, tmp_path / "catalog.html", catalog, tmp_path / "catalog.png",
               expect_charts={"bytes-per-topic", "segments-per-topic", "segment-sizes", "segment-ages"})
    assert sum(chart_y(browser, "bytes-per-topic")[0]) == catalog["summary"]["segment_bytes"]
    assert sum(chart_y(browser, "segment-sizes")[0]) == catalog["summary"]["segments"]

    base = ["--log-dirs", str(logs), "--now-ms", "2026-01-08T03:00:00Z",
            "--topic-config", "demo-orders:retention.bytes=1000000"]
    for mode, extra in (("plan", []), ("execute", ["--execute"])):
        report_path, page = tmp_path / f"retention-{mode}.json", tmp_path / f"retention-{mode}.html"
        assert retention_job.main(base + extra + ["--report", str(report_path), "--html", str(page)], spark=spark) == 0
        report = json.loads(report_path.read_text())
        s = report["summary"]
        assert s["bytes_freed"] > 0 and s["segments_deleted"] > 0
        facts = check_page(browser, page, report, tmp_path / f"retention-{mode}.png",
                           expect_charts={"bytes-per-topic", "bytes-per-rule", "timeline-0", "timeline-1", "timeline-2"})
        assert "timeline-3" not in facts["charts"]          # three partitions: three time lines
        assert sum(map(sum, chart_y(browser, "bytes-per-topic"))) == s["bytes_freed"] + s["bytes_freed_earlier"]
        assert sum(map(sum, chart_y(browser, "bytes-per-rule"))) == s["bytes_freed"] + s["bytes_freed_earlier"]
        # a time line's bars are the partition's segments: sizes and decisions as in the report
        first = browser.evaluate("document.querySelector('[data-chart=\"timeline-0\"]').layout.title.text").split(":")[0]
        topic, _, number = first.rpartition("-")
        segs = [x for x in report["segments"] if x["topic"] == topic and x["partition"] == int(number)]
        traces = browser.evaluate("document.querySelector('[data-chart=\"timeline-0\"]').data"
                                  ".map(t => [t.name, Array.from(t.y)])")
        assert sorted(y for name, ys in traces if name == "delete" for y in ys) == \
            sorted(x["size"] for x in segs if x["decision"] == "delete")
        assert sorted(y for name, ys in traces if name == "keep" for y in ys) == \
            sorted(x["size"] for x in segs if x["decision"] == "keep")
        assert browser.evaluate("document.querySelector('[data-chart=\"timeline-0\"]').layout.shapes.length") == 1
        assert table_rows(browser, "partitions") == len(report["partitions"]) == 3
        assert table_rows(browser, "topics", "1000000") == 1        # the retention.bytes override, as applied
        assert table_rows(browser, "partitions", "demo-orders-1") == 1
        assert browser.evaluate("window.kafkalogPickTimeline('demo-orders-2')") is True
        assert browser.evaluate("document.querySelector('[data-chart=\"timeline-picked\"] .main-svg') !== null")
    assert "applied" in (tmp_path / "retention-execute.html").read_text()[:3000]


def test_compaction_pages_dry_run_explain_and_run(spark, tmp_path, browser):
    from test_spark_compact import build, job_args
    from udfs import compact_job

    dirs = build(tmp_path / "logs")
    for mode, extra in (("dry", ["--dry-run", "--explain", "compacted:0:1"]), ("run", [])):
        report_path, page = tmp_path / f"compact-{mode}.json", tmp_path / f"compact-{mode}.html"
        assert compact_job.main(job_args(dirs, *extra, "--report", str(report_path), "--html", str(page)),
                                spark=spark) == 0
        report = json.loads(report_path.read_text())
        check_page(browser, page, report, tmp_path / f"compact-{mode}.png",
                   expect_charts={"dirty-ratio", "bytes-before-after", "records-removed"})
        with_ratio = sorted((p for p in report["partitions"] if p["cleanable_ratio"] is not None),
                            key=lambda p: -p["cleanable_ratio"])
        ratios, thresholds = chart_y(browser, "dirty-ratio")
        assert ratios == [p["cleanable_ratio"] for p in with_ratio]
        assert thresholds == [p["min_cleanable_dirty_ratio"] for p in with_ratio]
        before, after = chart_y(browser, "bytes-before-after")
        cleaned = [p for p in report["partitions"] if p["status"] in ("cleaned", "would-clean")]
        assert sum(before) == sum(p["bytes_before"] for p in cleaned)
        assert sum(before) - sum(after) == report["summary"]["bytes_removed"]
        assert table_rows(browser, "partitions") == len(report["partitions"]) == 5
        if mode == "dry":
            assert table_rows(browser, "explain") == 1
            assert "a later record has the same key" in browser.evaluate("document.body.innerText")


def test_a_page_that_cannot_be_written_is_exit_1_after_the_report(spark, tmp_path, capsys):
    from udfs import catalog_job

    logs = tmp_path / "logs"
    make_partition(logs, "t", 0, [[T0]])
    (tmp_path / "file").write_text("not a folder")
    code = catalog_job.entry(["--log-dirs", str(logs), "--dry-run", "--report", str(tmp_path / "r.json"),
                              "--html", str(tmp_path / "file" / "page.html")])
    assert code == 1
    err = capsys.readouterr().err
    assert "cannot write the HTML page" in err and "Traceback" not in err
    assert json.loads((tmp_path / "r.json").read_text())["summary"]["segments"] == 1


# --- 10,000 partitions ---------------------------------------------------------------------------

def clone_partitions(root: Path, count: int, topics: int = 20) -> Path:
    """A log dir of ``count`` partitions, each one of eight template partitions of 2-5 segments whose
    files it hard-links: writing each through the segment writer would take minutes, and ~100k file
    copies take long to write and to remove on a busy disk. Only for jobs that read (dry runs)."""
    templates = []
    for shape in range(8):
        segments = [[T0 + s * 6 * HOUR + shape * HOUR + r for r in range(1 + (shape * s) % 5)] for s in range(2 + shape % 4)]
        templates.append(sorted(make_partition(root / "templates", "shape", shape, segments).iterdir()))
    logs = root / "logs"
    logs.mkdir()
    for i in range(count):
        folder = logs / f"topic{i % topics:02d}-{i // topics}"
        folder.mkdir()
        for path in templates[(i * 7919) % len(templates)]:
            os.link(path, folder / path.name)
    return logs


def test_10k_partition_log_dir_through_the_jobs(spark, tmp_path, browser):
    from udfs import catalog_job, retention_job

    started = time.monotonic()
    logs = clone_partitions(tmp_path, 10_000)
    print(f"\n10,000 partition folders written in {time.monotonic() - started:.1f} s")
    try:
        args = ["--log-dirs", str(logs), "--now-ms", str(T0 + 2 * DAY), "--high-watermark-missing", "log-end",
                "--topic-config", "topic03:retention.bytes=300", "--topic-config", "topic05:retention.ms=36000000",
                "--report", str(tmp_path / "retention.json"), "--html", str(tmp_path / "retention.html")]
        started = time.monotonic()
        assert retention_job.main(args, spark=spark) == 0
        print(f"retention job with --html over 10,000 partitions: {time.monotonic() - started:.1f} s")
        report = json.loads((tmp_path / "retention.json").read_text())
        s = report["summary"]
        assert s["partitions"] == 10_000 and s["segments_deleted"] > 0
        check_page(browser, tmp_path / "retention.html", report, tmp_path / "retention.png",
                   expect_charts={"bytes-per-topic", "bytes-per-rule"} | {f"timeline-{i}" for i in range(6)})
        assert sum(map(sum, chart_y(browser, "bytes-per-topic"))) == s["bytes_freed"]
        assert table_rows(browser, "partitions") == 10_000
        assert table_rows(browser, "partitions", "topic05-") == 500
        assert table_rows(browser, "topics") == 20
        assert table_rows(browser, "topics", "36000000") == 1      # topic05's retention.ms override
        assert browser.evaluate("document.querySelectorAll('[data-table=\"partitions\"] tbody tr').length") == ROWS_PER_PAGE
        # the partitions that free the most are drawn first
        drawn = browser.evaluate("document.querySelector('[data-chart=\"timeline-0\"]').layout.title.text").split(":")[0]
        most = max(report["partitions"], key=lambda p: p["bytes_freed"])
        assert next(p for p in report["partitions"] if f"{p['topic']}-{p['partition']}" == drawn)["bytes_freed"] == \
            most["bytes_freed"]

        args = ["--log-dirs", str(logs), "--dry-run", "--report", str(tmp_path / "catalog.json"),
                "--html", str(tmp_path / "catalog.html")]
        started = time.monotonic()
        assert catalog_job.main(args, spark=spark) == 0
        print(f"catalog job with --html over 10,000 partitions: {time.monotonic() - started:.1f} s")
        catalog = json.loads((tmp_path / "catalog.json").read_text())
        check_page(browser, tmp_path / "catalog.html", catalog, tmp_path / "catalog.png",
                   expect_charts={"bytes-per-topic", "segments-per-topic", "segment-sizes", "segment-ages"})
        assert sum(chart_y(browser, "segments-per-topic")[0]) == catalog["summary"]["segments"]
    finally:
        started = time.monotonic()
        shutil.rmtree(logs, ignore_errors=True)        # ~100k links: do not keep them in pytest's tmp dirs
        print(f"log dir removed in {time.monotonic() - started:.1f} s")


# --- generated reports: optional keys, 10k and 100k partitions -----------------------------------

def compaction_report(partitions: int, *, passes=None, outcome: bool = False, seed: int = 7) -> dict:
    """A compact report in the job's shape, of ``partitions`` partitions."""
    rnd = random.Random(seed)
    rows = []
    for i in range(partitions):
        ratio = rnd.random()
        total = rnd.randrange(10_000, 10_000_000)
        clean = ratio > 0.5
        removed = int(total * ratio * 0.6) if clean else None
        read = rnd.randrange(100, 100_000) if clean else None
        kept = int(read * (1 - ratio * 0.6)) if clean else None
        superseded = (read - kept) if clean else None
        row = dict(log_dir="/data/k1", partition_dir=f"/data/k1/t{i % 50}-{i // 50}", topic=f"t{i % 50}",
                   partition=i // 50, status="would-clean" if clean else "skipped",
                   reason="cleanable" if clean else "dirty ratio is not above min.cleanable.dirty.ratio",
                   cleanable_ratio=ratio, min_cleanable_dirty_ratio=0.5, first_dirty_offset=0, total_bytes=total,
                   end_offset=1000 if clean else None, map_size=read, groups=1 if clean else None, duration_s=0.1,
                   bytes_removed=removed, bytes_before=total, bytes_after=total - (removed or 0), records_read=read,
                   records_kept=kept, records_superseded=superseded, tombstones_removed=0 if clean else None,
                   aborted_records_removed=0 if clean else None, markers_removed=0 if clean else None,
                   records_null_key=0 if clean else None)
        if passes == "count":
            row["passes"] = rnd.randrange(1, 4) if clean else None
            row["map_keys"] = read
        elif passes == "list":
            row["passes"] = [dict(keys=rnd.randrange(1, 100), upper_offset=100 * (k + 1)) for k in range(rnd.randrange(1, 3))]
        if outcome:
            row["outcome"] = "done" if clean else rnd.choice(["not needed", "failed", "rolled back"])
        rows.append(row)

    def total(key):
        return sum(r[key] or 0 for r in rows)
    statuses: dict = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    if outcome:
        outcomes: dict = {}
        for r in rows:
            outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    summary = dict(partitions=len(rows), statuses=statuses, bytes_before=total("bytes_before"),
                   bytes_after=total("bytes_after"), bytes_removed=total("bytes_removed"),
                   records_read=total("records_read"), records_kept=total("records_kept"),
                   records_superseded=total("records_superseded"), tombstones_removed=0, aborted_records_removed=0,
                   markers_removed=0, log_dirs_refused=[], dry_run=True, now_ms=NOW, duration_s=1.0)
    if outcome:
        summary["outcomes"] = outcomes
    return dict(job="compact", run_id="generated", now_ms=NOW, dry_run=True, summary=summary, partitions=rows,
                explain=[], audit=None)


def retention_report(partitions: int, segments_each: int = 3, *, seed: int = 11) -> dict:
    """A retention plan in the job's shape: ``partitions`` partitions of ``segments_each`` segments, the
    older ones deleted by retention.ms in a third of them."""
    rnd = random.Random(seed)
    outcomes, segments = [], []
    for i in range(partitions):
        topic, number = f"topic{i % 100}", i // 100
        freed = deleted = size_before = 0
        for s in range(segments_each):
            size = rnd.randrange(1_000, 1_000_000)
            delete = i % 3 == 0 and s < segments_each - 1
            segments.append(dict(topic=topic, partition=number, base_offset=s * 1000, size=size,
                                 decision="delete" if delete else "keep", rule="retention.ms" if delete else None,
                                 reason="", log_dir="/data/k1", largest_timestamp_ms=T0 + s * DAY + i))
            size_before += size
            if delete:
                freed += size
                deleted += 1
        outcomes.append(dict(log_dir="/data/k1", partition_dir=f"/data/k1/{topic}-{number}", topic=topic,
                             partition=number, status="planned", message=None, cleanup_policy="delete",
                             retention_ms=7 * DAY, retention_bytes=-1, log_start_offset=0,
                             new_log_start_offset=deleted * 1000, log_end_offset=segments_each * 1000,
                             high_watermark=segments_each * 1000, high_watermark_source="checkpoint",
                             size_before=size_before, bytes_freed=freed, segments_deleted=deleted,
                             segments_deleted_earlier=0, bytes_freed_earlier=0, bytes_purged=0))
    topics: dict = {}
    for o in outcomes:
        t = topics.setdefault(o["topic"], dict(partitions=0, segments_deleted=0, bytes_freed=0,
                                               segments_deleted_earlier=0, bytes_freed_earlier=0, bytes_purged=0))
        t["partitions"] += 1
        t["segments_deleted"] += o["segments_deleted"]
        t["bytes_freed"] += o["bytes_freed"]
    summary = dict(partitions=partitions, statuses={"planned": partitions}, segments=len(segments),
                   segments_deleted=sum(o["segments_deleted"] for o in outcomes),
                   bytes_freed=sum(o["bytes_freed"] for o in outcomes), segments_deleted_earlier=0,
                   bytes_freed_earlier=0, bytes_purged=0, topics=dict(sorted(topics.items())), errors=[],
                   log_dirs_refused=[], dry_run=True, now_ms=T0 + 10 * DAY, duration_s=1.0)
    return dict(job="retention", run_id="generated", now_ms=T0 + 10 * DAY, executed=False,
                high_watermark_missing="zero", segments=segments, summary=summary, partitions=outcomes,
                checkpoints=[], audit=None)


@pytest.mark.parametrize("passes", [None, "count", "list"])
def test_compaction_page_shows_passes_and_outcomes_when_the_report_has_them(tmp_path, browser, passes):
    report = compaction_report(60, passes=passes, outcome=passes is not None)
    page = tmp_path / "compact.html"
    page.write_text(render_page(report))
    expected = {"dirty-ratio", "bytes-before-after", "records-removed"}
    facts = check_page(browser, page, report, tmp_path / "compact.png",
                       expect_charts=expected | ({"passes", "outcomes"} if passes else set()))
    if passes is None:
        assert not {"passes", "outcomes"} & set(facts["charts"])
        return
    counts = sorted((len(p["passes"]) if passes == "list" else p["passes"] for p in report["partitions"]
                     if p["passes"] is not None), reverse=True)
    assert chart_y(browser, "passes")[0] == counts[:40]
    outcomes = {}
    for p in report["partitions"]:
        outcomes[p["outcome"]] = outcomes.get(p["outcome"], 0) + 1
    assert chart_y(browser, "outcomes")[0] == [outcomes[k] for k in sorted(outcomes)]
    headers = browser.evaluate("[...document.querySelectorAll('[data-table=\"partitions\"] th')].map(th => th.textContent)")
    assert "key map passes" in headers and "outcome" in headers
    assert ("distinct keys" in headers) == (passes == "count")
    shown = {k for k, _, _ in browser.evaluate(NUMBERS_JS)}
    assert {f"summary.outcomes.{k}" for k in outcomes} <= shown      # and check_page compared their values
    if passes == "list":
        assert table_rows(browser, "passes") == sum(len(p["passes"]) for p in report["partitions"])


def test_generated_10k_compaction_page_opens_quickly(tmp_path, browser):
    report = compaction_report(10_000, passes="count", outcome=True)
    started = time.monotonic()
    html = compaction_page(report)
    print(f"\ncompaction page of 10,000 partitions rendered in {time.monotonic() - started:.2f} s")
    page = tmp_path / "compact.html"
    page.write_text(html)
    check_page(browser, page, report, tmp_path / "compact.png",
               expect_charts={"dirty-ratio", "dirty-ratio-histogram", "bytes-before-after", "records-removed", "passes"})
    histogram = browser.evaluate("document.querySelector('[data-chart=\"dirty-ratio-histogram\"]').data[0].x.length")
    assert histogram == 10_000                       # every partition's ratio in the histogram
    assert len(chart_y(browser, "dirty-ratio")[0]) == 200
    assert table_rows(browser, "partitions") == 10_000


def test_100k_partitions_make_a_bounded_page(tmp_path, browser):
    for name, report, render in (("retention", retention_report(100_000), retention_page),
                                 ("compaction", compaction_report(100_000), compaction_page)):
        started = time.monotonic()
        html = render(report)
        took = time.monotonic() - started
        page = tmp_path / f"{name}.html"
        page.write_text(html)
        size = page.stat().st_size
        print(f"\n{name} page of 100,000 partitions: {size / 1e6:.1f} MB, rendered in {took:.1f} s")
        assert size < PAGE_BYTES_MAX_100K
        started = time.monotonic()
        assert browser.open(page) == []
        print(f"  opened and drawn in {time.monotonic() - started:.1f} s")
        assert table_rows(browser, "partitions") == 100_000
        if name == "retention":   # time lines embedded for the partitions that free the most, within the budget
            lines = browser.evaluate("JSON.parse(document.getElementById('timeline-data').textContent)"
                                     ".map(p => [p.freed, p.size.length])")
            assert len(lines) <= TIMELINE_PARTITIONS_MAX and sum(n for _, n in lines) <= TIMELINE_SEGMENT_BUDGET
            assert lines[0][0] == max(p["bytes_freed"] for p in report["partitions"])
            assert [f for f, _ in lines] == sorted((f for f, _ in lines), reverse=True)


def test_sparse_reports_errors_and_older_reports_still_make_pages(tmp_path, browser):
    """Nothing to do, partitions in error, a refused log dir, a catalog report without the aggregates:
    each page still opens without errors, draws its charts and lists the errors."""
    retention = retention_report(4)
    retention["partitions"].append(dict(log_dir="/data/k1", partition_dir="/data/k1/bad-0", topic="bad", partition=0,
                                        status="error", message="/data/k1/bad-0/00.log: byte 61: CRC mismatch"))
    retention["summary"]["statuses"]["error"] = 1
    retention["summary"]["errors"] = [dict(partition_dir="/data/k1/bad-0", message="byte 61: CRC mismatch")]
    retention["summary"]["log_dirs_refused"] = [dict(log_dir="/data/k2", message="/data/k2: its .lock is held")]
    empty_retention = retention_report(0)
    empty_compaction = compaction_report(0)
    old_catalog = dict(job="catalog", run_id="old", log_dirs=["/data/k1"], dry_run=True, table=None, problems=[
        dict(partition_dir="/data/k1/t-0", problems=["t-0/00.log: byte 12: truncated batch"])],
        summary=dict(folders=1, segments=2, segment_bytes=300, leftover_groups=0, failed_folders=0, duration_s=0.5))
    for name, report, charts in (
            ("retention-errors", retention, {"bytes-per-topic", "bytes-per-rule", "timeline-0"}),
            ("retention-empty", empty_retention, {"bytes-per-topic", "bytes-per-rule"}),
            ("compaction-empty", empty_compaction, {"dirty-ratio", "bytes-before-after", "records-removed"}),
            ("catalog-old", old_catalog, set())):
        page = tmp_path / f"{name}.html"
        page.write_text(render_page(report))
        facts = check_page(browser, page, report, tmp_path / f"{name}.png", expect_charts=charts,
                           allow_empty_charts=True)
        if name == "retention-errors":
            assert table_rows(browser, "errors") == 2
            assert table_rows(browser, "partitions") == 5
        if name == "catalog-old":
            assert not facts["charts"]
            assert table_rows(browser, "problems") == 1
            assert "summary only" in browser.evaluate("document.body.innerText")


def test_a_report_of_another_job_has_no_page():
    with pytest.raises(ValueError, match="no HTML page for job 'lookup'"):
        render_page({"job": "lookup"})
