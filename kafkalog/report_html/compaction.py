"""The compact job's report (dry run or run) as an HTML page: each partition's dirty ratio against its
``min.cleanable.dirty.ratio``, bytes before/after and records removed per partition (expected in a
dry run, measured in a run), the key map's passes and per-partition outcomes when the report has
them, ``--explain`` answers, every partition in a sortable table.

Optional keys are shown when present and never required: ``passes`` (a count or a list of passes, per
partition or for the run) and a per-partition ``outcome``.
"""
from __future__ import annotations

from kafkalog.report_html.page import BAD_COLOUR, GOOD_COLOUR, NEUTRAL_COLOUR, Column, Page, iso_ms

PARTITIONS_CHARTED = 40          # partitions drawn by name in the per-partition bar charts
RATIOS_CHARTED = 200             # dirtiest partitions drawn in the dirty-ratio chart
RATIO_BINS = 20                  # histogram of every partition's dirty ratio, when there are more

CLEANED, WOULD_CLEAN, SKIPPED, ERROR = "cleaned", "would-clean", "skipped", "error"
STATUS_COLOURS = {CLEANED: GOOD_COLOUR, WOULD_CLEAN: GOOD_COLOUR, SKIPPED: NEUTRAL_COLOUR, ERROR: BAD_COLOUR}
REMOVED_KINDS = (("records_superseded", "superseded"), ("tombstones_removed", "tombstones"),
                 ("aborted_records_removed", "aborted"), ("markers_removed", "transaction markers"),
                 ("records_null_key", "null key"))

PARTITION_COLUMNS = (
    Column("name", "partition"), Column("topic", "topic"), Column("partition", "#", "int"),
    Column("status", "status"), Column("cleanable_ratio", "dirty ratio", "float"),
    Column("min_cleanable_dirty_ratio", "min.cleanable.dirty.ratio", "float"),
    Column("bytes_before", "bytes before", "int"), Column("bytes_after", "bytes after", "int"),
    Column("bytes_removed", "bytes removed", "int"), Column("records_read", "records read", "int"),
    Column("records_kept", "records kept", "int"), Column("records_removed", "records removed", "int"),
    Column("first_dirty_offset", "first dirty", "int"), Column("end_offset", "cleaned up to", "int"),
    Column("map_size", "keys in map", "int"), Column("duration_s", "seconds", "float"),
    Column("log_dir", "log dir"), Column("reason", "reason"),
)

# shown when the report has them: the key map's passes and size, and each partition's outcome
OPTIONAL_COLUMNS = (Column("outcome", "outcome"), Column("passes", "key map passes", "int"),
                    Column("map_keys", "distinct keys", "int"), Column("map_budget", "key map budget", "int"),
                    Column("map_bytes", "key map bytes", "int"))


def compaction_page(report: dict) -> str:
    """The page for a compact report (``udfs.compact_job``'s JSON, as a dict)."""
    summary = report.get("summary") or {}
    partitions = report.get("partitions") or []
    dry = bool(report.get("dry_run"))
    measured = "expected" if dry else "measured"

    page = Page(f"kafkalog compaction — {'plan (dry run)' if dry else 'run'}")
    page.fact("run id", report.get("run_id"))
    page.fact("decided as of (now)", f"{iso_ms(report.get('now_ms'))} ({report.get('now_ms')})")
    page.fact("dry run", "yes" if dry else "no")
    page.fact("log dirs", ", ".join(sorted({p.get("log_dir") or "?" for p in partitions})) or "—")
    page.fact("duration", f"{summary.get('duration_s')} s")

    read, kept = summary.get("records_read"), summary.get("records_kept")
    page.heading("Summary", f"the numbers of the JSON report's summary ({measured})")
    page.numbers([
        ("partitions", "summary.partitions", summary.get("partitions")),
        ("bytes before", "summary.bytes_before", summary.get("bytes_before")),
        ("bytes after", "summary.bytes_after", summary.get("bytes_after")),
        ("bytes removed", "summary.bytes_removed", summary.get("bytes_removed")),
        ("records read", "summary.records_read", read),
        ("records kept", "summary.records_kept", kept),
        ("records superseded", "summary.records_superseded", summary.get("records_superseded")),
        ("tombstones removed", "summary.tombstones_removed", summary.get("tombstones_removed")),
        ("aborted records removed", "summary.aborted_records_removed", summary.get("aborted_records_removed")),
        ("markers removed", "summary.markers_removed", summary.get("markers_removed")),
    ] + [(f"partitions {status}", f"summary.statuses.{status}", n)
         for status, n in sorted((summary.get("statuses") or {}).items())]
      + [(f"outcome: {outcome}", f"summary.outcomes.{outcome}", n)
         for outcome, n in sorted((summary.get("outcomes") or {}).items())]
      + ([("key map passes", "summary.passes", summary["passes"])] if _is_number(summary.get("passes")) else []))

    rows = [_row(p) for p in partitions]
    _ratio_charts(page, rows)
    _size_charts(page, rows, measured)
    _passes(page, report, rows)
    _outcomes(page, rows)

    explain = report.get("explain") or []
    if explain:
        page.heading(f"Explained records ({len(explain)})")
        page.table("explain", (Column("name", "partition"), Column("offset", "offset", "int"),
                               Column("explanation", "why")),
                   [dict(e, name=f"{e.get('topic')}-{e.get('partition')}") for e in explain])

    page.heading("Partitions", "every partition of the report; click a column to sort, type to search")
    extra = [column for column in OPTIONAL_COLUMNS if any(column.key in p for p in partitions)]
    page.table("partitions", PARTITION_COLUMNS[:4] + tuple(extra) + PARTITION_COLUMNS[4:], rows)

    refused = summary.get("log_dirs_refused") or []
    page.heading(f"Refused log dirs ({len(refused)})")
    if refused:
        page.table("refused", (Column("log_dir", "log dir"), Column("message", "message")), refused)
    else:
        page.note("none")
    return page.html()


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _row(p: dict) -> dict:
    read, kept = p.get("records_read"), p.get("records_kept")
    row = dict(p, name=f"{p.get('topic')}-{p.get('partition')}",
               records_removed=None if read is None or kept is None else read - kept)
    if "passes" in p:
        row["passes"] = pass_count(p["passes"])
        if isinstance(p["passes"], (list, tuple)):
            row["passes_detail"] = list(p["passes"])
    return row


def pass_count(passes):
    """A partition's ``passes`` as a number: a count stays a count, a list counts its passes."""
    if isinstance(passes, (list, tuple)):
        return len(passes)
    return passes if _is_number(passes) else None


def _ratio_charts(page: Page, rows: list) -> None:
    import plotly.graph_objects as go

    with_ratio = sorted((r for r in rows if r.get("cleanable_ratio") is not None),
                        key=lambda r: (-r["cleanable_ratio"], r["name"]))
    page.heading("Dirty ratio", "each partition's dirty ratio (dirty bytes / cleanable bytes) against its "
                 f"min.cleanable.dirty.ratio; the {min(RATIOS_CHARTED, len(with_ratio))} dirtiest of "
                 f"{len(with_ratio):,} partitions with a ratio" + (" (all of them in the histogram below)"
                                                                     if len(with_ratio) > RATIOS_CHARTED else ""))
    top = with_ratio[:RATIOS_CHARTED]
    names = [r["name"] for r in top]
    fig = go.Figure()
    fig.add_trace(go.Bar(name="dirty ratio", x=names, y=[r["cleanable_ratio"] for r in top],
                         marker_color=[STATUS_COLOURS.get(r.get("status"), NEUTRAL_COLOUR) for r in top],
                         customdata=[[r.get("status"), r.get("reason") or ""] for r in top],
                         hovertemplate="%{x}: %{y:.3f}<br>%{customdata[0]}: %{customdata[1]}<extra></extra>"))
    fig.add_trace(go.Scatter(name="min.cleanable.dirty.ratio", x=names,
                             y=[r.get("min_cleanable_dirty_ratio") for r in top], mode="lines+markers",
                             line=dict(color="#000", dash="dash", shape="hvh")))
    fig.update_layout(title="dirty ratio per partition (green: cleaned or to clean, grey: skipped, red: error)",
                      yaxis=dict(title="dirty ratio", range=[0, 1.05]), legend=dict(orientation="h", y=-0.25))
    page.chart("dirty-ratio", fig, height=400)
    if len(with_ratio) > RATIOS_CHARTED:
        fig = go.Figure(go.Histogram(x=[r["cleanable_ratio"] for r in with_ratio],
                                     xbins=dict(start=0, end=1.0 + 1e-9, size=1 / RATIO_BINS)))
        thresholds = sorted({r.get("min_cleanable_dirty_ratio") for r in with_ratio
                             if r.get("min_cleanable_dirty_ratio") is not None})
        for t in thresholds[:5]:
            fig.add_vline(x=t, line_dash="dash", annotation_text=f"min.cleanable.dirty.ratio {t:g}")
        fig.update_layout(title="partitions by dirty ratio", xaxis_title="dirty ratio", yaxis_title="partitions",
                          height=300)
        page.chart("dirty-ratio-histogram", fig, height=300)


def _size_charts(page: Page, rows: list, measured: str) -> None:
    import plotly.graph_objects as go

    done = sorted((r for r in rows if r.get("status") in (CLEANED, WOULD_CLEAN)),
                  key=lambda r: (-(r.get("bytes_removed") or 0), r["name"]))
    page.heading(f"Bytes and records removed ({measured})",
                 f"the {min(PARTITIONS_CHARTED, len(done))} of {len(done):,} cleaned partitions that shrink the most")
    top = done[:PARTITIONS_CHARTED]
    names = [r["name"] for r in top] or ["(no partition cleaned)"]
    fig = go.Figure([go.Bar(name="bytes before", x=names, y=[r.get("bytes_before") for r in top] or [0]),
                     go.Bar(name="bytes after", x=names, y=[r.get("bytes_after") for r in top] or [0])])
    fig.update_layout(barmode="group", title=f"bytes before and after compaction ({measured})", yaxis_title="bytes")
    page.chart("bytes-before-after", fig)
    fig = go.Figure([go.Bar(name=label, x=names, y=[r.get(key) or 0 for r in top] or [0])
                     for key, label in REMOVED_KINDS])
    fig.update_layout(barmode="stack", title=f"records removed per partition ({measured})", yaxis_title="records")
    page.chart("records-removed", fig)


def _passes(page: Page, report: dict, rows: list) -> None:
    import plotly.graph_objects as go

    counted = [r for r in rows if _is_number(r.get("passes"))]
    if not counted:
        return
    page.heading("Key map passes", "how many passes each partition's key map took")
    top = sorted(counted, key=lambda r: (-r["passes"], r["name"]))[:PARTITIONS_CHARTED]
    fig = go.Figure(go.Bar(x=[r["name"] for r in top], y=[r["passes"] for r in top]))
    fig.update_layout(title="key map passes per partition (most first)", yaxis_title="passes", height=300)
    page.chart("passes", fig, height=300)
    detail = [dict(name=r["name"], index=i, detail=", ".join(f"{k}={v}" for k, v in sorted(one.items()))
                   if isinstance(one, dict) else str(one))
              for r in rows if isinstance(r.get("passes_detail"), list) for i, one in enumerate(r["passes_detail"])]
    if detail:
        page.table("passes", (Column("name", "partition"), Column("index", "pass #", "int"), Column("detail", "the pass")),
                   detail)


def _outcomes(page: Page, rows: list) -> None:
    import plotly.graph_objects as go

    outcomes: dict = {}
    for r in rows:
        if r.get("outcome") is not None:
            outcomes[str(r["outcome"])] = outcomes.get(str(r["outcome"]), 0) + 1
    if not outcomes:
        return
    page.heading("Outcomes", "partitions per outcome")
    names = sorted(outcomes)
    fig = go.Figure(go.Bar(x=names, y=[outcomes[n] for n in names]))
    fig.update_layout(title="partitions per outcome", yaxis_title="partitions", height=300)
    page.chart("outcomes", fig, height=300)
