"""The catalog job's report as an HTML page: bytes and segments per topic, the distributions of
segment sizes and ages, leftover files and unreadable folders listed, the summary numbers.

The catalog report carries these as aggregates (``topics``, ``size_histogram``, ``age_histogram``,
``leftovers``, ``errors``, ``problems``: see ``udfs.catalog_job``), so the page's size does not grow
with the number of segments; a report without them (an older run) gets the summary alone.
"""
from __future__ import annotations

from kafkalog.report_html.page import Column, Page, format_number, human_bytes, iso_ms, top_with_rest

TOPICS_CHARTED = 40
MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000

TOPIC_COLUMNS = (Column("topic", "topic"), Column("partitions", "partitions", "int"),
                 Column("segments", "segments", "int"), Column("bytes", "bytes", "int"),
                 Column("leftovers", "leftover groups", "int"), Column("errors", "unreadable folders", "int"))


def catalog_page(report: dict) -> str:
    """The page for a catalog report (``udfs.catalog_job``'s JSON, as a dict)."""
    import plotly.graph_objects as go

    summary = report.get("summary") or {}
    page = Page(f"kafkalog catalog{' (dry run)' if report.get('dry_run') else ''}")
    page.fact("run id", report.get("run_id"))
    if report.get("run_at_ms") is not None:
        page.fact("run at", f"{iso_ms(report['run_at_ms'])} ({report['run_at_ms']})")
    page.fact("log dirs", ", ".join(report.get("log_dirs") or []) or "—")
    table = report.get("table") or {}
    page.fact("Delta table", f"{table.get('path', '—')} (version {table.get('version', '—')})" if table else
              "none written")
    page.fact("duration", f"{summary.get('duration_s')} s")

    page.heading("Summary", "the numbers of the JSON report's summary")
    page.numbers([
        ("partition folders", "summary.folders", summary.get("folders")),
        ("segments", "summary.segments", summary.get("segments")),
        ("segment bytes", "summary.segment_bytes", summary.get("segment_bytes")),
        ("leftover groups", "summary.leftover_groups", summary.get("leftover_groups")),
        ("unreadable folders", "summary.failed_folders", summary.get("failed_folders")),
    ])

    topics = report.get("topics")
    if topics is None:
        page.note("this report has no per-topic aggregates (written by an older kafkalog): summary only")
    else:
        page.heading("Topics", f"{len(topics):,} topics; the {min(TOPICS_CHARTED, len(topics))} largest by name, the rest "
                     "summed")
        shown = top_with_rest([(t, v.get("bytes") or 0) for t, v in topics.items()], TOPICS_CHARTED, "other {n} topics")
        names = [n for n, _ in shown]
        charted = set(names)
        segs = [topics[n]["segments"] if n in topics else
                sum(v.get("segments") or 0 for t, v in topics.items() if t not in charted) for n in names]
        fig = go.Figure(go.Bar(x=names, y=[b for _, b in shown], name="bytes",
                               text=[human_bytes(b) for _, b in shown], hovertemplate="%{x}: %{y:,} bytes<extra></extra>"))
        fig.update_layout(title="segment bytes per topic", yaxis_title="bytes")
        page.chart("bytes-per-topic", fig)
        fig = go.Figure(go.Bar(x=names, y=segs, name="segments", marker_color="#9467bd",
                               hovertemplate="%{x}: %{y:,} segments<extra></extra>"))
        fig.update_layout(title="segments per topic", yaxis_title="segments")
        page.chart("segments-per-topic", fig)
        page.table("topics", TOPIC_COLUMNS, [dict(v, topic=t) for t, v in sorted(topics.items())])

    for key, name, title, label in (("size_histogram", "segment-sizes", "segment sizes", _size_label),
                                    ("age_histogram", "segment-ages", "segment ages (run time − largest timestamp)",
                                     _age_label)):
        bins = report.get(key)
        if bins is None:
            continue
        page.heading(title.split(" (")[0].capitalize(), "segments per bin (log scale bins); hover for bytes")
        labels = [label(b) for b in bins]
        fig = go.Figure(go.Bar(x=labels or ["(no segment)"], y=[b["segments"] for b in bins] or [0],
                               customdata=[human_bytes(b.get("bytes")) for b in bins] or None,
                               hovertemplate="%{x}: %{y:,} segments, %{customdata}<extra></extra>"))
        fig.update_layout(title=title, yaxis_title="segments", xaxis_type="category", height=320)
        page.chart(name, fig, height=320)

    leftovers = report.get("leftovers")
    if leftovers is not None:
        total = summary.get("leftover_groups") or len(leftovers)
        page.heading(f"Leftover files ({format_number(total)} groups)",
                     "files a broker removes or completes at startup: .deleted, .cleaned, .swap, orphan indexes"
                     + (f"; the first {len(leftovers):,} listed" if total > len(leftovers) else ""))
        if leftovers:
            page.table("leftovers", (Column("partition_dir", "partition folder"), Column("files", "files"),
                                     Column("size", "bytes", "int")),
                       [dict(l, files=" ".join(l.get("files") or [])) for l in leftovers], total=total)
        else:
            page.note("none")
    errors = report.get("errors")
    problems = report.get("problems") or []
    page.heading(f"Unreadable folders ({format_number(summary.get('failed_folders'))}) and problems "
                 f"({len(problems):,} folders)")
    listed = [dict(partition_dir=e.get("partition_dir"), kind="unreadable", text="; ".join(e.get("problems") or []))
              for e in (errors or [])]
    listed += [dict(partition_dir=p.get("partition_dir"), kind="problem", text="; ".join(p.get("problems") or []))
               for p in problems]
    if listed:
        page.table("problems", (Column("partition_dir", "partition folder"), Column("kind", "kind"),
                                Column("text", "what")), listed)
    else:
        page.note("none")
    return page.html()


def _size_label(b: dict) -> str:
    if b.get("hi") is None:
        return f"≥ {human_bytes(b['lo'])}"
    if not b.get("lo"):
        return f"< {human_bytes(b['hi'])}"
    return f"{human_bytes(b['lo'])}–{human_bytes(b['hi'])}"


def _age_label(b: dict) -> str:
    if b.get("lo") is None:
        return "in the future"
    if b.get("hi") is None:
        return f"≥ {_duration(b['lo'])}"
    if not b["lo"]:
        return f"< {_duration(b['hi'])}"
    return f"{_duration(b['lo'])}–{_duration(b['hi'])}"


def _duration(ms: int) -> str:
    if ms < HOUR_MS:
        return f"{ms / MINUTE_MS:.0f} min"
    if ms < DAY_MS:
        return f"{ms / HOUR_MS:.0f} h"
    return f"{ms / DAY_MS:.0f} d"
