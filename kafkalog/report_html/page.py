"""One self-contained HTML page for a job report: header facts, summary numbers, plotly charts and
sortable, searchable tables, with plotly.js inlined once so the page opens offline.

Layout of the page (what the browser tests look for):

* ``[data-key]`` elements hold one number each: ``data-value`` is the report's value (the JSON's
  number, unformatted) and the text shows it with thousands separators;
* ``div.chart[data-chart=NAME]`` is a plotly chart; every figure is a JSON blob in a
  ``<script type="application/json" class="figure">`` and one loop draws them all;
* ``div.table[data-table=NAME]`` is a table whose rows live in a JSON blob (columnar, repeated
  strings dictionary-encoded), drawn a page of rows at a time, sortable by any column, filtered by
  a search box: 100,000 rows cost a few MB of JSON, not 100,000 DOM rows.

Charts are built with plotly's ``graph_objects`` (validated there) and carry no template, so each
figure stays small; the page's CSS and plotly.js's defaults style them.
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Optional, Sequence

ROWS_PER_PAGE = 50                 # table rows drawn at once
DICT_ENCODE_MIN_ROWS = 64          # string columns of longer tables are dictionary-encoded

# colours shared by the pages (decision / status → colour)
DELETE_COLOUR, KEEP_COLOUR, EARLIER_COLOUR = "#d62728", "#1f77b4", "#ff7f0e"
GOOD_COLOUR, BAD_COLOUR, NEUTRAL_COLOUR = "#2ca02c", "#d62728", "#7f7f7f"


# --- data structures -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """A table column: ``kind`` is ``text``, ``int``, ``float`` or ``time`` (epoch ms shown as UTC)."""
    key: str
    label: str
    kind: str = "text"


@dataclass
class Page:
    """The page being assembled: append header facts, numbers, charts, tables, then ``html()``."""
    title: str
    facts: list = field(default_factory=list)           # (label, text)
    parts: list = field(default_factory=list)           # HTML fragments, in order
    figures: int = 0

    def fact(self, label: str, value: Any) -> None:
        self.facts.append((label, "—" if value is None else str(value)))

    def heading(self, text: str, note: Optional[str] = None) -> None:
        self.parts.append(f"<h2>{_e(text)}</h2>" + (f"<p class='note'>{_e(note)}</p>" if note else ""))

    def note(self, text: str) -> None:
        self.parts.append(f"<p class='note'>{_e(text)}</p>")

    def numbers(self, items: Iterable[tuple]) -> None:
        """Summary cards: (label, key, value); ``key`` names the report field the value came from."""
        cards = []
        for label, key, value in items:
            cards.append(f"<div class='card'><div class='label'>{_e(label)}</div>"
                         f"<div class='num' data-key='{_e(key)}' data-value='{_e(_raw(value))}'"
                         f" title='{_e(human_bytes(value) if 'bytes' in key and isinstance(value, int) else '')}'>"
                         f"{_e(format_number(value))}</div></div>")
        self.parts.append(f"<div class='cards'>{''.join(cards)}</div>")

    def chart(self, name: str, figure, *, height: int = 380) -> None:
        """A plotly figure (``plotly.graph_objects.Figure``), drawn by the page's loader."""
        spec = figure.to_plotly_json()
        layout = spec.get("layout", {})
        layout.pop("template", None)
        layout.setdefault("height", height)
        layout.setdefault("margin", {"l": 70, "r": 20, "t": 50, "b": 60})
        self.figures += 1
        self.parts.append(f"<div class='chart' id='chart-{_e(name)}' data-chart='{_e(name)}'></div>"
                          f"<script type='application/json' class='figure' data-target='chart-{_e(name)}'>"
                          f"{_json(dict(data=spec.get('data', []), layout=layout))}</script>")

    def table(self, name: str, columns: Sequence[Column], rows: Sequence[dict], *, caption: Optional[str] = None,
              total: Optional[int] = None) -> None:
        """A sortable, searchable table of ``rows`` (dicts keyed by the columns' keys). ``total`` says how
        many rows there were when ``rows`` is a part of them."""
        data, dicts = {}, {}
        for c in columns:
            values = [r.get(c.key) for r in rows]
            if c.kind == "float":       # shown to 4 significant digits: 6 keep the JSON small and sorting exact enough
                values = [float(f"{v:.6g}") if isinstance(v, float) else v for v in values]
            if c.kind == "text" and len(values) >= DICT_ENCODE_MIN_ROWS:
                codes: list = []
                index: dict = {}
                for v in values:
                    codes.append(index.setdefault(v, len(index)))
                if len(index) * 2 < len(values):
                    data[c.key], dicts[c.key] = codes, list(index)
                    continue
            data[c.key] = values
        spec = dict(columns=[dict(key=c.key, label=c.label, kind=c.kind) for c in columns], data=data, dicts=dicts,
                    rows=len(rows), total=len(rows) if total is None else total, page=ROWS_PER_PAGE)
        cap = f"<p class='note'>{_e(caption)}</p>" if caption else ""
        self.parts.append(f"<div class='table' id='table-{_e(name)}' data-table='{_e(name)}'>{cap}</div>"
                          f"<script type='application/json' class='table-data' data-target='table-{_e(name)}'>"
                          f"{_json(spec)}</script>")

    def data(self, element_id: str, value: Any) -> None:
        """JSON for the page's own script, in ``<script type="application/json" id=element_id>``."""
        self.parts.append(f"<script type='application/json' id='{_e(element_id)}'>{_json(value)}</script>")

    def raw(self, fragment: str) -> None:
        """An HTML fragment the caller built (escaped by the caller)."""
        self.parts.append(fragment)

    def html(self, *, script: str = "") -> str:
        """The whole page; ``script`` is page-specific JavaScript run after the charts are drawn."""
        from plotly.offline import get_plotlyjs

        facts = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in self.facts)
        return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
                f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
                f"<title>{_e(self.title)}</title><style>{_CSS}</style>"
                f"<script>{get_plotlyjs()}</script></head><body>"
                f"<h1>{_e(self.title)}</h1><table class='facts'>{facts}</table>"
                f"{''.join(self.parts)}"
                f"<script>{_LOADER}</script><script>{script}</script></body></html>\n")


# --- formatting ----------------------------------------------------------------------------------

def format_number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.1f}"
    return str(value)


def human_bytes(n: Optional[int]) -> str:
    if n is None:
        return "—"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"


def iso_ms(ms: Optional[int]) -> Optional[str]:
    """Epoch milliseconds as ISO-8601 UTC (None stays None)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def top_with_rest(items: Sequence[tuple], limit: int, rest_label: str) -> list:
    """(name, value) pairs, largest first: the first ``limit`` and one ``rest_label`` pair summing the rest."""
    ranked = sorted(items, key=lambda kv: (-kv[1], kv[0]))
    if len(ranked) <= limit:
        return ranked
    rest = ranked[limit:]
    return ranked[:limit] + [(rest_label.format(n=len(rest)), sum(v for _, v in rest))]


def _raw(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _json(value: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px;margin:0 0 8px} h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
.note{color:#555;font-size:13px;margin:4px 0 8px}
table.facts{border-collapse:collapse;font-size:13px} table.facts th{text-align:left;padding:1px 12px 1px 0;color:#555}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:8px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:6px 10px;min-width:120px}
.card .label{font-size:12px;color:#555} .card .num{font-size:18px;font-variant-numeric:tabular-nums}
.chart{width:100%;min-height:200px}
.table{overflow-x:auto} .table table{border-collapse:collapse;font-size:12px;width:100%}
.table th{cursor:pointer;background:#f3f3f3;text-align:left;padding:3px 6px;position:sticky;top:0;user-select:none}
.table td{padding:2px 6px;border-top:1px solid #eee;font-variant-numeric:tabular-nums}
.table td.n{text-align:right} .table input{margin:4px 8px 4px 0;padding:3px 6px;width:280px}
.table .pager button{margin:0 2px} .table .count{font-size:12px;color:#555}
.pick{margin:6px 0} .pick input{padding:3px 6px;width:320px}
ul.list{font-size:13px}
"""

# Draws every figure and table of the page. Tables: columnar data, dictionary-decoded on access,
# sorted by a permutation array and filtered by a lower-cased row text built once.
_LOADER = r"""
(function(){
  var cfg={responsive:true,displaylogo:false};
  document.querySelectorAll('script.figure').forEach(function(s){
    var f=JSON.parse(s.textContent);
    Plotly.newPlot(document.getElementById(s.dataset.target),f.data,f.layout,cfg);
  });
  function fmt(v,kind){
    if(v===null||v===undefined)return '—';
    if(kind==='int')return Number(v).toLocaleString('en-US');
    if(kind==='float')return Number(v).toPrecision(4);
    if(kind==='time')return new Date(v).toISOString().replace('.000Z','Z');
    return String(v);
  }
  window.kafkalogTables={};
  document.querySelectorAll('script.table-data').forEach(function(s){
    var t=JSON.parse(s.textContent), box=document.getElementById(s.dataset.target);
    var cols=t.columns, n=t.rows;
    function val(c,i){var d=t.data[c.key][i];return t.dicts[c.key]?t.dicts[c.key][d]:d;}
    var text=null, order=[], shown=[], page=0, sortKey=null, asc=true;
    for(var i=0;i<n;i++)order.push(i);
    shown=order.slice();
    var head=document.createElement('div');
    var search=document.createElement('input'); search.type='search'; search.placeholder='search '+n+' rows…';
    var count=document.createElement('span'); count.className='count';
    var pager=document.createElement('span'); pager.className='pager';
    head.appendChild(search); head.appendChild(pager); head.appendChild(count); box.appendChild(head);
    var table=document.createElement('table'), thead=document.createElement('thead'), tbody=document.createElement('tbody');
    var tr=document.createElement('tr');
    cols.forEach(function(c){var th=document.createElement('th');th.textContent=c.label;th.dataset.col=c.key;
      th.addEventListener('click',function(){sortBy(c.key);});tr.appendChild(th);});
    thead.appendChild(tr); table.appendChild(thead); table.appendChild(tbody); box.appendChild(table);
    function draw(){
      tbody.textContent='';
      var pages=Math.max(1,Math.ceil(shown.length/t.page)); if(page>=pages)page=pages-1;
      shown.slice(page*t.page,(page+1)*t.page).forEach(function(i){
        var row=document.createElement('tr'); row.dataset.row=i;
        cols.forEach(function(c){var td=document.createElement('td');td.textContent=fmt(val(c,i),c.kind);
          if(c.kind!=='text')td.className='n';row.appendChild(td);});
        tbody.appendChild(row);
      });
      pager.textContent='';
      [['«',0],['‹',page-1],['›',page+1],['»',pages-1]].forEach(function(b){
        var btn=document.createElement('button');btn.textContent=b[0];btn.disabled=b[1]<0||b[1]>=pages||b[1]===page;
        btn.addEventListener('click',function(){page=b[1];draw();});pager.appendChild(btn);});
      count.textContent=' page '+(page+1)+' of '+pages+' · '+shown.length.toLocaleString('en-US')+' of '+
        n.toLocaleString('en-US')+' rows'+(t.total>n?' (of '+t.total.toLocaleString('en-US')+' in the report)':'');
    }
    function filter(){
      var q=search.value.trim().toLowerCase();
      if(!q){shown=order.slice();}
      else{
        if(text===null){text=[];for(var i=0;i<n;i++){text.push(cols.map(function(c){return fmt(val(c,i),c.kind);}).join(' ').toLowerCase());}}
        shown=order.filter(function(i){return text[i].indexOf(q)>=0;});
      }
      page=0; draw();
    }
    function sortBy(key){
      asc=(sortKey===key)?!asc:(cols.filter(function(c){return c.key===key;})[0].kind==='text');
      sortKey=key; var c=cols.filter(function(c){return c.key===key;})[0];
      order.sort(function(a,b){var x=val(c,a),y=val(c,b);
        if(x===y)return a-b; if(x===null||x===undefined)return 1; if(y===null||y===undefined)return -1;
        return (x<y?-1:1)*(asc?1:-1);});
      thead.querySelectorAll('th').forEach(function(th){th.textContent=cols.filter(function(c){return c.key===th.dataset.col;})[0].label+
        (th.dataset.col===key?(asc?' ▲':' ▼'):'');});
      filter();
    }
    search.addEventListener('input',filter);
    window.kafkalogTables[box.dataset.table]={search:function(q){search.value=q;filter();},shown:function(){return shown.length;},
      sortBy:sortBy,value:function(key,i){return val(cols.filter(function(c){return c.key===key;})[0],i);}};
    draw();
  });
})();
"""
