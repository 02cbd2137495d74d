"""Reports a person can look at: a job's JSON report (a dict) as one self-contained HTML page with
plotly charts, for the catalog, retention, compact and diverge jobs (``--html PATH``).

One pure function per job kind (report dict → HTML string), no file or Spark access: the jobs write
the string where ``--html`` says. Optional report keys are shown when present and never required.

plotly: its plotly.js (one file, MIT, released every few weeks) is inlined once per page, so a page
opens offline with zoom, hover and legend toggles; the figures are built and validated with plotly's
Python ``graph_objects``.
"""
from __future__ import annotations

from kafkalog.report_html.catalog import catalog_page
from kafkalog.report_html.compaction import compaction_page
from kafkalog.report_html.divergence import divergence_page
from kafkalog.report_html.retention import retention_page

PAGES = {"catalog": catalog_page, "retention": retention_page, "compact": compaction_page,
         "diverge": divergence_page}


def render_page(report: dict) -> str:
    """The page for ``report``, chosen by its ``job`` key."""
    job = report.get("job")
    if job not in PAGES:
        raise ValueError(f"no HTML page for job {job!r} (pages exist for {', '.join(sorted(PAGES))})")
    return PAGES[job](report)


__all__ = ["PAGES", "catalog_page", "compaction_page", "divergence_page", "render_page", "retention_page"]
