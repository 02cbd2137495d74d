"""The diverge job's report as an HTML page: partitions per verdict, for each partition that differs each
replica's log end against what Kafka's leader-epoch truncation keeps, every replica in a sortable table, the
partitions held by one broker only and the errors.
"""
from __future__ import annotations

from kafkalog.report_html.page import BAD_COLOUR, GOOD_COLOUR, KEEP_COLOUR, NEUTRAL_COLOUR, Column, Page, top_with_rest

VERDICT_COLOURS = {"identical": GOOD_COLOUR, "lagging": KEEP_COLOUR, "compacted": "#17becf",
                   "ahead": "#ff7f0e", "diverged": BAD_COLOUR, "error": NEUTRAL_COLOUR}
PARTITIONS_CHARTED = 40            # differing partitions drawn by name; the table has every one

REPLICA_COLUMNS = (
    Column("name", "partition"), Column("verdict", "partition verdict"), Column("replica", "replica"),
    Column("replica_verdict", "replica verdict"), Column("is_leader", "leader"),
    Column("log_start_offset", "log start", "int"), Column("log_end_offset", "log end", "int"),
    Column("latest_epoch", "latest epoch", "int"), Column("first_differing_offset", "first differing", "int"),
    Column("lag", "lag", "int"), Column("kept_offset", "Kafka keeps up to", "int"),
    Column("truncated", "truncated", "int"), Column("log_dir", "log dir"), Column("detail", "detail"),
)


def divergence_page(report: dict) -> str:
    """The page for a diverge report (``udfs.diverge_job``'s JSON, as a dict)."""
    import plotly.graph_objects as go

    summary = report.get("summary") or {}
    partitions = report.get("partitions") or []
    rows = report.get("rows") or []
    page = Page("kafkalog diverge — replicas compared")
    page.fact("run id", report.get("run_id"))
    page.fact("brokers", "; ".join(f"{name}: {', '.join(dirs)}" for name, dirs in (report.get("brokers") or {}).items()))
    page.fact("leader taken by", report.get("leader_policy"))
    page.fact("topics", ", ".join(report.get("topics") or []) or "all")
    page.fact("duration", f"{summary.get('duration_s')} s")

    page.heading("Summary", "the numbers of the JSON report's summary")
    by_verdict = summary.get("by_verdict") or {}
    page.numbers([("brokers", "summary.brokers", summary.get("brokers")),
                  ("partitions compared", "summary.partitions_compared", summary.get("partitions_compared")),
                  ("partitions on one broker only", "summary.partitions_single", summary.get("partitions_single")),
                  ("offsets truncation would cut", "summary.truncated_offsets", summary.get("truncated_offsets")),
                  ("errors", "summary.errors", summary.get("errors"))]
                 + [(f"partitions {v}", f"summary.by_verdict.{v}", n) for v, n in sorted(by_verdict.items())])

    verdicts = sorted(by_verdict, key=lambda v: list(VERDICT_COLOURS).index(v) if v in VERDICT_COLOURS else 99)
    fig = go.Figure(go.Bar(x=verdicts or ["(none)"], y=[by_verdict[v] for v in verdicts] or [0],
                           marker_color=[VERDICT_COLOURS.get(v, NEUTRAL_COLOUR) for v in verdicts] or None,
                           hovertemplate="%{x}: %{y:,} partitions<extra></extra>"))
    fig.update_layout(title="partitions per verdict", yaxis_title="partitions", height=300)
    page.chart("verdicts", fig, height=300)

    differing = [p for p in partitions if p.get("first_differing_offset") is not None or p.get("verdict") == "lagging"]
    shown = {name for name, _ in top_with_rest(
        [(f"{p['topic']}-{p['partition']}", max((r.get("truncated") or 0) + abs(r.get("lag") or 0)
                                                for r in p.get("replicas") or [{}])) for p in differing],
        PARTITIONS_CHARTED, "")}
    page.heading("Replicas that differ", f"per partition that is not identical (the {PARTITIONS_CHARTED} with the most "
                 "offsets at stake): each replica's log end, and the part Kafka's leader-epoch truncation keeps")
    fig = go.Figure()
    names, kept, cut, labels = [], [], [], []
    for p in differing:
        name = f"{p['topic']}-{p['partition']}"
        if name not in shown:
            continue
        for r in p.get("replicas") or []:
            names.append(f"{name} / {r['replica']}")
            kept.append(r["kept_offset"])
            cut.append(r["truncated"])
            labels.append(("leader" if r["leader"] else r["verdict"]) + (f", differs from {r['first_differing_offset']}"
                                                                        if r.get("first_differing_offset") is not None else ""))
    fig.add_trace(go.Bar(name="kept", x=names, y=kept, marker_color=KEEP_COLOUR, customdata=labels,
                         hovertemplate="%{x}<br>kept up to %{y:,}<br>%{customdata}<extra></extra>"))
    fig.add_trace(go.Bar(name="truncated", x=names, y=cut, marker_color=BAD_COLOUR,
                         hovertemplate="%{x}<br>%{y:,} offsets truncated<extra></extra>"))
    if not names:
        fig.add_annotation(text="every compared partition is identical", xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False)
    fig.update_layout(barmode="stack", title="log end offsets: kept and truncated", yaxis_title="offset")
    page.chart("replicas", fig)

    page.heading("Replicas", "one row per replica of each compared partition; click a column to sort, type to search")
    page.table("replicas", REPLICA_COLUMNS,
               [dict(r, name=f"{r.get('topic')}-{r.get('partition')}", is_leader="yes" if r.get("is_leader") else "")
                for r in rows if r.get("status") == "compared"])
    single = report.get("single") or []
    page.heading(f"Held by one broker only ({len(single)})", "listed, not compared")
    if single:
        page.table("single", (Column("name", "partition"), Column("broker", "broker")),
                   [dict(s, name=f"{s.get('topic')}-{s.get('partition')}") for s in single])
    else:
        page.note("none")
    errors = report.get("errors") or []
    page.heading(f"Errors ({len(errors)})")
    if errors:
        page.table("errors", (Column("message", "message"),), [dict(message=e) for e in errors])
    else:
        page.note("none")
    return page.html()
