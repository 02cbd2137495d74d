"""The state of one dump run that every file-type dumper writes into: the options, Kafka's end-of-run
report maps (filled per file, printed by :class:`~kafkalog.tools.dump.dumper.Dumper` at the end), and
the helpers that make output lines. The per-file modules import this, never the dumper that dispatches
to them, so the imports of ``tools/dump`` run one way: dumper -> per-file modules -> this."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from kafkalog.errors import KafkalogError
from kafkalog.tools.dump.options import DumpOptions
from kafkalog.tools.dump.output import STDERR, STDOUT, FileSummary, Line, json_line


class DumpRun:
    """One run's options, summaries and end-of-run report maps, and the output-line helpers.

    ``options``: the dump options (defaults when None); ``prog``: the name error lines start with;
    ``bulk``: deep-iteration text of plain v2 batches comes as STDOUT_BYTES blocks (many lines,
    formatted at once); False: one Line per line throughout."""

    def __init__(self, options: Optional[DumpOptions] = None, *, prog: str = "kafkalog dump", bulk: bool = True):
        self.options = options or DumpOptions()
        self.prog = prog
        self.bulk = bulk
        self.summaries: List[FileSummary] = []
        # Kafka's maps, keyed by absolute path (printed in java.util.HashMap order: java_hash_map_order)
        self.index_mismatches: Dict[str, Dict[int, int]] = {}     # index offset -> log offset
        self.time_mismatches: Dict[str, List[Tuple[int, int]]] = {}
        self.time_out_of_order: Dict[str, List[Tuple[int, int]]] = {}
        self.time_not_found: Dict[str, List[Tuple[int, int]]] = {}
        self.non_consecutive: Dict[str, Dict[int, int]] = {}      # previous offset -> next offset

    @property
    def exit_code(self) -> int:
        return 1 if any(s.errors for s in self.summaries) else 0

    # -- output helpers (the file-type dumpers write through these) --

    def out(self, text: str) -> Line:
        return Line(STDOUT, text)

    def obj(self, obj: dict) -> Line:
        return Line(STDOUT, json_line(obj))

    def error(self, summary: FileSummary, error: KafkalogError) -> Line:
        summary.errors.append(error)
        return Line(STDERR, f"{self.prog}: error: {error}")

    def warning(self, text: str) -> Line:
        return Line(STDERR, f"{self.prog}: warning: {text}")
