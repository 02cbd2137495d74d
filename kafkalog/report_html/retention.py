"""The retention job's report (plan or applied) as an HTML page: bytes to free per topic and per
rule, each partition's segments on a time line against its retention horizon, every partition in a
sortable table, the summary numbers of the JSON.

Large runs: the per-topic chart keeps the largest topics and sums the rest; time lines are embedded
for the partitions that free the most bytes (then the largest), up to a budget of segments, and the
first few are drawn; any embedded partition can be picked by name; every partition is a table row.
"""
from __future__ import annotations

from typing import Optional

from kafkalog.report_html.page import (DELETE_COLOUR, EARLIER_COLOUR, KEEP_COLOUR, Column, Page, format_number, human_bytes, iso_ms,
                                       top_with_rest)

TOPICS_CHARTED = 40                 # topics drawn by name in the per-topic chart; the rest are one bar
TIMELINES_DRAWN = 6                 # partitions whose time line is drawn when the page opens
TIMELINE_SEGMENT_BUDGET = 40_000    # segments embedded for the partition picker, at most
TIMELINE_PARTITIONS_MAX = 5_000     # partitions embedded for the picker, at most
HOUR_MS = 3_600_000

DELETE, KEEP, EARLIER_ATTEMPT = "delete", "keep", "earlier attempt"    # decisions / rule in the report
DECISIONS = (("keep", KEEP_COLOUR), ("delete", DELETE_COLOUR), ("deleted by an earlier attempt", EARLIER_COLOUR))
RULE_COLOURS = {"log_start_offset": "#9467bd", "retention.bytes": "#8c564b", "retention.ms": DELETE_COLOUR,
                EARLIER_ATTEMPT: EARLIER_COLOUR}

PARTITION_COLUMNS = (
    Column("name", "partition"), Column("topic", "topic"), Column("partition", "#", "int"),
    Column("status", "status"), Column("segments", "segments", "int"),
    Column("segments_deleted", "segments deleted", "int"), Column("bytes_freed", "bytes freed", "int"),
    Column("size_before", "bytes before", "int"), Column("retention_ms", "retention.ms", "int"),
    Column("retention_bytes", "retention.bytes", "int"), Column("log_start_offset", "log start", "int"),
    Column("new_log_start_offset", "new log start", "int"), Column("high_watermark", "HW", "int"),
    Column("log_dir", "log dir"), Column("message", "message"),
)


def retention_page(report: dict) -> str:
    """The page for a retention report (``udfs.retention_job``'s JSON, as a dict)."""
    summary = report.get("summary") or {}
    partitions = report.get("partitions") or []
    segments = report.get("segments") or []
    executed = bool(report.get("executed"))
    verb = "freed" if executed else "to free"

    page = Page(f"kafkalog retention — {'applied' if executed else 'plan (dry run)'}")
    page.fact("run id", report.get("run_id"))
    page.fact("decided as of (now)", f"{iso_ms(report.get('now_ms'))} ({report.get('now_ms')})")
    page.fact("executed", "yes" if executed else "no (dry run)")
    page.fact("missing high watermark means", report.get("high_watermark_missing"))
    page.fact("log dirs", ", ".join(sorted({p.get("log_dir") or "?" for p in partitions})) or "—")
    page.fact("duration", f"{summary.get('duration_s')} s")

    page.heading("Summary", "the numbers of the JSON report's summary")
    page.numbers([
        ("partitions", "summary.partitions", summary.get("partitions")),
        ("segments", "summary.segments", summary.get("segments")),
        ("segments deleted" if executed else "segments to delete", "summary.segments_deleted",
         summary.get("segments_deleted")),
        (f"bytes {verb}", "summary.bytes_freed", summary.get("bytes_freed")),
        ("segments deleted by an earlier attempt", "summary.segments_deleted_earlier",
         summary.get("segments_deleted_earlier")),
        ("bytes freed by an earlier attempt", "summary.bytes_freed_earlier", summary.get("bytes_freed_earlier")),
        ("bytes of .deleted files removed", "summary.bytes_purged", summary.get("bytes_purged")),
    ] + [(f"partitions {status}", f"summary.statuses.{status}", n)
         for status, n in sorted((summary.get("statuses") or {}).items())])

    _bytes_charts(page, summary, segments, verb)
    _topic_table(page, summary, partitions, verb)
    _timelines(page, report, partitions, segments)

    page.heading("Partitions", "every partition of the report; click a column to sort, type to search")
    counts = _segment_counts(segments)
    rows = [dict(p, name=f"{p.get('topic')}-{p.get('partition')}",
                 segments=counts.get((p.get("log_dir"), p.get("topic"), p.get("partition")), 0),
                 bytes_freed=(p.get("bytes_freed") or 0) + (p.get("bytes_freed_earlier") or 0),
                 segments_deleted=(p.get("segments_deleted") or 0) + (p.get("segments_deleted_earlier") or 0))
            for p in partitions]
    page.table("partitions", PARTITION_COLUMNS, rows)

    errors = summary.get("errors") or []
    refused = summary.get("log_dirs_refused") or []
    page.heading(f"Errors ({len(errors)}) and refused log dirs ({len(refused)})")
    if errors or refused:
        page.table("errors", (Column("where", "partition or log dir"), Column("message", "message")),
                   [dict(where=e.get("partition_dir"), message=e.get("message")) for e in errors]
                   + [dict(where=r.get("log_dir"), message=r.get("message")) for r in refused])
    else:
        page.note("none")
    return page.html(script=_TIMELINE_JS)


def _topic_table(page: Page, summary: dict, partitions: list, verb: str) -> None:
    """Per topic: the retention settings the run applied (the inputs that decide) and its totals."""
    settings: dict = {}
    for p in partitions:
        entry = settings.setdefault(p.get("topic") or "?", (set(), set(), set()))
        for values, key in zip(entry, ("retention_ms", "retention_bytes", "cleanup_policy")):
            if p.get(key) is not None:
                values.add(p[key])
    rows = []
    for topic, t in (summary.get("topics") or {}).items():
        ms, size, policy = settings.get(topic, (set(), set(), set()))
        rows.append(dict(topic=topic, partitions=t.get("partitions"),
                         segments_deleted=(t.get("segments_deleted") or 0) + (t.get("segments_deleted_earlier") or 0),
                         bytes_freed=(t.get("bytes_freed") or 0) + (t.get("bytes_freed_earlier") or 0),
                         bytes_purged=t.get("bytes_purged"), retention_ms=", ".join(map(str, sorted(ms))),
                         retention_bytes=", ".join(map(str, sorted(size))), cleanup_policy=", ".join(sorted(policy))))
    page.table("topics", (Column("topic", "topic"), Column("partitions", "partitions", "int"),
                          Column("segments_deleted", f"segments {'deleted' if verb == 'freed' else 'to delete'}", "int"),
                          Column("bytes_freed", f"bytes {verb}", "int"),
                          Column("bytes_purged", "bytes of .deleted removed", "int"),
                          Column("retention_ms", "retention.ms"), Column("retention_bytes", "retention.bytes"),
                          Column("cleanup_policy", "cleanup.policy")), rows,
               caption="per topic: the settings the run applied (-1: unlimited) and its totals")


def _segment_counts(segments: list) -> dict:
    counts: dict = {}
    for s in segments:
        key = (s.get("log_dir"), s.get("topic"), s.get("partition"))
        counts[key] = counts.get(key, 0) + 1
    return counts


def _bytes_charts(page: Page, summary: dict, segments: list, verb: str) -> None:
    import plotly.graph_objects as go

    page.heading(f"Bytes {verb}", "per topic, split by the rule that deletes each segment; per rule")
    by_topic_rule: dict = {}
    by_rule: dict = {}
    for s in segments:
        if s.get("decision") != DELETE:
            continue
        rule = s.get("rule") or "?"
        by_topic_rule.setdefault(s.get("topic") or "?", {}).setdefault(rule, 0)
        by_topic_rule[s.get("topic") or "?"][rule] += s.get("size") or 0
        by_rule[rule] = by_rule.get(rule, 0) + (s.get("size") or 0)
    topics = summary.get("topics") or {}
    totals = [(t, (v.get("bytes_freed") or 0) + (v.get("bytes_freed_earlier") or 0)) for t, v in topics.items()]
    shown = top_with_rest(totals, TOPICS_CHARTED, "other {n} topics")
    names = [name for name, _ in shown]
    rules = sorted(by_rule)
    fig = go.Figure()
    for rule in rules:
        ys = []
        for name, _ in shown:
            if name in by_topic_rule or name in topics:
                ys.append(by_topic_rule.get(name, {}).get(rule, 0))
            else:                       # the "other" bar
                charted = set(names)
                ys.append(sum(r.get(rule, 0) for t, r in by_topic_rule.items() if t not in charted))
        fig.add_trace(go.Bar(name=rule, x=names, y=ys, marker_color=RULE_COLOURS.get(rule),
                             hovertemplate="%{x}<br>" + rule + ": %{y:,} bytes<extra></extra>"))
    if not rules:
        fig.add_trace(go.Bar(name="nothing to delete", x=names or ["(no topic)"], y=[0] * max(1, len(names))))
        fig.add_annotation(text="no segment to delete", xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False)
    fig.update_layout(barmode="stack", title=f"bytes {verb} per topic (by rule)", yaxis_title="bytes",
                      legend_title_text="rule")
    page.chart("bytes-per-topic", fig)

    fig = go.Figure(go.Bar(x=rules or ["(none)"], y=[by_rule[r] for r in rules] or [0],
                           marker_color=[RULE_COLOURS.get(r, DELETE_COLOUR) for r in rules] or None, text=[human_bytes(by_rule[r]) for r in rules] or None,
                           hovertemplate="%{x}: %{y:,} bytes<extra></extra>"))
    fig.update_layout(title=f"bytes {verb} per rule", yaxis_title="bytes", height=300)
    page.chart("bytes-per-rule", fig, height=300)


def _timelines(page: Page, report: dict, partitions: list, segments: list) -> None:
    by_partition: dict = {}
    for s in segments:
        by_partition.setdefault((s.get("log_dir"), s.get("topic"), s.get("partition")), []).append(s)

    def freed(p):
        return (p.get("bytes_freed") or 0) + (p.get("bytes_freed_earlier") or 0)

    ranked = sorted(partitions, key=lambda p: (-freed(p), -(p.get("size_before") or 0),
                                               p.get("topic") or "", p.get("partition") or 0))
    embedded: list = []
    budget = TIMELINE_SEGMENT_BUDGET
    for p in ranked:
        segs = by_partition.get((p.get("log_dir"), p.get("topic"), p.get("partition")))
        if not segs or len(embedded) >= TIMELINE_PARTITIONS_MAX or len(segs) > budget:
            continue
        line = timeline_data(p, segs, report.get("now_ms"))
        if line is None:
            continue
        budget -= len(segs)
        embedded.append(line)
    page.heading("Segments in time",
                 f"each bar is a segment: it spans from the previous segment's largest timestamp to its own, its "
                 f"height is its size; red: deleted, blue: kept; the dashed line is the retention horizon (now − "
                 f"retention.ms). Drawn: the {min(TIMELINES_DRAWN, len(embedded))} partitions that free the most "
                 f"bytes; {len(embedded):,} of {len(partitions):,} partitions can be picked below"
                 + ("" if len(embedded) == len(partitions) else " (the others are in the table and the JSON report)"))
    page.raw("<div class='pick'>partition: <input id='timeline-pick' list='timeline-names' "
             "placeholder='type topic-partition'><datalist id='timeline-names'></datalist></div>"
             "<div class='chart' id='chart-timeline-picked' data-chart='timeline-picked' style='display:none'></div>")
    for i in range(min(TIMELINES_DRAWN, len(embedded))):
        page.raw(f"<div class='chart timeline' id='chart-timeline-{i}' data-chart='timeline-{i}'></div>")
    page.data("timeline-data", embedded)


def timeline_data(partition: dict, segments: list, now_ms: Optional[int]) -> Optional[dict]:
    """One partition's segments as bars: start/end (ms), size, decision, rule and base offset, oldest
    first; the retention horizon when retention.ms is finite. None when no segment has a timestamp."""
    segs = sorted((s for s in segments if s.get("largest_timestamp_ms") is not None),
                  key=lambda s: s.get("base_offset") or 0)
    if not segs:
        return None
    ends = [s["largest_timestamp_ms"] for s in segs]
    span = max(max(ends) - min(ends), HOUR_MS)
    starts = []
    for i, end in enumerate(ends):
        if i > 0:
            start = ends[i - 1]
        elif len(ends) > 1:
            start = end - max(ends[1] - end, span // (4 * len(ends)))
        else:
            start = end - HOUR_MS
        if end - start < span // 200:               # out-of-order or equal timestamps: a thin bar
            start = end - span // 200
        starts.append(start)
    retention_ms = partition.get("retention_ms")
    horizon = now_ms - retention_ms if now_ms is not None and retention_ms is not None and retention_ms >= 0 else None
    decision = [2 if s.get("rule") == EARLIER_ATTEMPT else (1 if s.get("decision") == DELETE else 0) for s in segs]
    return dict(name=f"{partition.get('topic')}-{partition.get('partition')}", log_dir=partition.get("log_dir"),
                start=starts, end=ends, size=[s.get("size") or 0 for s in segs], decision=decision,
                rule=[s.get("rule") or "" for s in segs], base=[s.get("base_offset") for s in segs],
                horizon=horizon, now=now_ms, freed=(partition.get("bytes_freed") or 0)
                + (partition.get("bytes_freed_earlier") or 0), status=partition.get("status"),
                title=f"{partition.get('topic')}-{partition.get('partition')}: {format_number(len(segs))} segments, "
                      f"{human_bytes(partition.get('size_before'))}, "
                      f"{human_bytes((partition.get('bytes_freed') or 0) + (partition.get('bytes_freed_earlier') or 0))}"
                      f" to free ({partition.get('status')})")


_TIMELINE_JS = """
(function(){
  var lines=JSON.parse(document.getElementById('timeline-data').textContent);
  var kinds=%s;
  function draw(div,p){
    var traces=kinds.map(function(k,code){
      var idx=[];for(var i=0;i<p.size.length;i++)if(p.decision[i]===code)idx.push(i);
      return {type:'bar',name:k[0],marker:{color:k[1],line:{color:'#fff',width:1}},
        x:idx.map(function(i){return (p.start[i]+p.end[i])/2;}),width:idx.map(function(i){return p.end[i]-p.start[i];}),
        y:idx.map(function(i){return p.size[i];}),
        customdata:idx.map(function(i){return [p.base[i],p.rule[i]||'kept',new Date(p.end[i]).toISOString()];}),
        hovertemplate:'base offset %%{customdata[0]}<br>%%{y:,} bytes<br>largest timestamp %%{customdata[2]}<br>%%{customdata[1]}<extra></extra>'};
    }).filter(function(t){return t.x.length>0;});
    var shapes=[],ann=[];
    if(p.horizon!==null){shapes.push({type:'line',xref:'x',yref:'paper',x0:p.horizon,x1:p.horizon,y0:0,y1:1,line:{dash:'dash',color:'#000'}});
      ann.push({xref:'x',yref:'paper',x:p.horizon,y:1,text:'retention horizon',showarrow:false,xanchor:'left',yanchor:'bottom'});}
    Plotly.newPlot(div,traces,{title:{text:p.title},height:300,barmode:'overlay',bargap:0,margin:{l:70,r:20,t:50,b:40},
      xaxis:{type:'date',title:{text:'largest timestamp (UTC)'}},yaxis:{title:{text:'bytes'}},shapes:shapes,annotations:ann},
      {responsive:true,displaylogo:false});
  }
  for(var i=0;i<lines.length;i++){var d=document.getElementById('chart-timeline-'+i); if(!d)break; draw(d,lines[i]);}
  var names=document.getElementById('timeline-names'), byName={};
  lines.forEach(function(p){var key=p.name+(byName[p.name]?' ('+p.log_dir+')':'');byName[key]=p;
    var o=document.createElement('option');o.value=key;names.appendChild(o);});
  var pick=document.getElementById('timeline-pick'), picked=document.getElementById('chart-timeline-picked');
  function show(){var p=byName[pick.value.trim()]; if(!p)return; picked.style.display='block'; draw(picked,p);}
  pick.addEventListener('change',show); pick.addEventListener('input',show);
  window.kafkalogPickTimeline=function(name){pick.value=name;show();return !!byName[name];};
})();
""" % (repr([list(k) for k in DECISIONS]).replace("'", '"'),)
