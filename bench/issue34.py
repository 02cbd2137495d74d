"""Issue 34's yardsticks in ONE run on the same generated *mixed* bytes (``python -m bench.compact
--issue34``; the data, the job runner and the split measurement are ``bench.compact``'s).

Per repetition, in this order, the load average read before each step:

1. **clean_partition** of the four *mixed* partitions one after the other in this process (kernels
   warmed on *tiny* once before the first repetition): wall and thread CPU seconds;
2. **the codec floor** of that same round (``bench/codec_floor.py``): every compressed source batch
   decompressed once, every rewritten batch of clean_partition's output recompressed and CRC'd, the
   output written and fsynced. clean_partition ÷ floor = floor seconds / clean_partition seconds
   (target ≥ 0.67), in wall and in CPU seconds;
3. **the broker's cleaner thread** on the same bytes (``bench.broker_cleaner.run_broker``: Apache Kafka
   4.4.0, one cleaner thread, its own statistics block; CPU from /proc). clean_partition ÷ broker =
   broker seconds / clean_partition seconds (target ≥ 5×); the records each kept must agree;
4. **the split** (``bench.compact.measure_split``): one *mixed* partition by the job on local[2] in one
   task (``--split never``) and split across both cores (``--split always``); the compact stage's wall
   time (``summary.stage_s``), one task ÷ split (target ≥ 1.6); the two outputs byte-equal;
5. **memory**, from step 4's two reports: the partition row's ``rss_anon_above_idle_bytes`` (the
   largest over the split round's slice and group tasks; the one task's), against the key-map budget
   (the row's ``map_budget``, a task's share of ``log.cleaner.dedupe.buffer.size``) + 64 MiB.

One markdown table: every step's median over the repetitions (and each repetition's value), the
three ratios against their targets, the memory figures, and the 1-minute load before each step.

    python -m bench.compact --issue34 [--reps 3] [--json out.json]
"""
from __future__ import annotations

import os
import platform
import shutil
import statistics
import time
from pathlib import Path
from typing import Callable, List, Optional

from bench.codec_floor import measure_floor
from bench.compact import MEMORY_MARGIN, WORK, ensure_data, measure_single, measure_split
from bench.split_ceiling import measure_split_ceiling

MIB = 1 << 20
STEPS = ("clean_partition", "floor", "broker", "split")


def _broker(mixed: Path, log: Callable) -> dict:
    from bench.broker_cleaner import run_broker

    for attempt in range(3):          # a start can fail on a machine this loaded (a timeout): again
        try:
            b = run_broker(mixed, WORK / "broker", log=lambda *a: None)
            break
        except Exception as e:  # noqa: BLE001 - retried, then raised
            log(f"broker run failed ({type(e).__name__}: {str(e)[:300]}); attempt {attempt + 1}")
            if attempt == 2:
                raise
    shutil.rmtree(WORK / "broker", ignore_errors=True)
    return dict(seconds=sum(x["seconds"] for x in b["rows"]), cpu_s=b["cleaner_cpu_s"],
                records=sum(x["records"] for x in b["rows"]), kept=sum(x["kept"] for x in b["rows"]),
                load_before_rounds=b["load_before"])


def one_rep(mixed: Path, log: Callable = print, big: Optional[Path] = None) -> dict:
    """The four steps on ``mixed`` (the split's on ``big``), in order, each with the load average before it."""
    r: dict = {"load": {}}
    r["load"]["clean_partition"] = os.getloadavg()
    r["single"] = measure_single(mixed, "single")
    log(f"clean_partition {r['single']['wall_s']:.2f} s ({r['single']['cpu_s']:.2f} CPU s)")
    r["load"]["floor"] = os.getloadavg()
    r["floor"] = measure_floor(mixed, Path(r["single"]["work"]), WORK)
    log(f"floor {r['floor']['floor_s']:.2f} s ({r['floor']['floor_cpu_s']:.2f} CPU s)")
    r["load"]["broker"] = os.getloadavg()
    r["broker"] = _broker(mixed, log)
    log(f"broker {r['broker']['seconds']:.1f} s ({r['broker']['cpu_s']:.2f} CPU s)")
    r["load"]["split"] = os.getloadavg()
    split = measure_split(big or mixed)
    r["split"] = {k: v for k, v in split.items() if k not in ("memory_split", "memory_one")}
    r["split"]["workers"] = {"split": split["memory_split"].get("python worker", {}),
                             "one_task": split["memory_one"].get("python worker", {})}
    r["load"]["end"] = os.getloadavg()
    log(f"split: one task {split['one_task_stage_s']:.1f} s (tiny {split['fixed_one_task_stage_s']:.1f}), split "
        f"{split['split_stage_s']:.1f} s (tiny {split['fixed_split_stage_s']:.1f}), equal {split['equal']}; "
        f"rss above idle {split['split_rss_anon_above_idle']} / {split['one_task_rss_anon_above_idle']}")
    r["load"]["ceiling"] = os.getloadavg()
    r["ceiling"] = measure_split_ceiling(big or mixed)
    log(f"split ceiling on 2 cores: one task {r['ceiling']['one_task_cpu_s']:.2f} CPU s, critical path "
        f"{r['ceiling']['critical_path_s']:.2f} s: {r['ceiling']['ceiling']:.2f}x")
    single, fl, b = r["single"], r["floor"], r["broker"]
    r["ratios"] = dict(floor=fl["floor_s"] / single["wall_s"], floor_cpu=fl["floor_cpu_s"] / single["cpu_s"],
                       broker=b["seconds"] / single["wall_s"],
                       broker_cpu=b["cpu_s"] / single["cpu_s"] if single["cpu_s"] else float("nan"),
                       split=split["ratio"])
    return r


def run(reps: int = 1, log: Callable = print) -> dict:
    mixed, tiny, big = ensure_data("mixed", log), ensure_data("tiny", log), ensure_data("big", log)
    t0, load0 = time.perf_counter(), os.getloadavg()
    measure_single(tiny, "warm")                           # compiles (or loads) the kernels
    runs = []
    for i in range(reps):
        log(f"repetition {i + 1} of {reps}")
        runs.append(one_rep(mixed, log, big))
    return dict(runs=runs, load_start=load0, load_end=os.getloadavg(), wall_s=time.perf_counter() - t0,
                cpus=os.cpu_count(), python=platform.python_version())


def _med(values: List[float]) -> float:
    return statistics.median(values)


def _each(values: List[float], fmt: str) -> str:
    return "" if len(values) < 2 else " (" + ", ".join(format(v, fmt) for v in values) + ")"


def _mib(n: Optional[float]) -> str:
    return "—" if n is None else f"{n / MIB:,.1f}"


def _loads(runs: List[dict], step: str) -> str:
    return ", ".join(f"{r['load'][step][0]:.2f}" for r in runs)


def render(result: dict) -> str:
    """One markdown table: the steps in run order, medians (each repetition's values in brackets)."""
    runs = result["runs"]
    n = len(runs)

    def col(get) -> List[float]:
        return [get(r) for r in runs]

    single_w, single_c = col(lambda r: r["single"]["wall_s"]), col(lambda r: r["single"]["cpu_s"])
    floor_w, floor_c = col(lambda r: r["floor"]["floor_s"]), col(lambda r: r["floor"]["floor_cpu_s"])
    br_w, br_c = col(lambda r: r["broker"]["seconds"]), col(lambda r: r["broker"]["cpu_s"])
    one_s, split_s = col(lambda r: r["split"]["one_task_net_s"]), col(lambda r: r["split"]["split_net_s"])
    fixed_one, fixed_split = col(lambda r: r["split"]["fixed_one_task_stage_s"]), col(lambda r: r["split"]["fixed_split_stage_s"])
    raw = col(lambda r: r["split"]["raw_ratio"])
    ceil, ceil_one = col(lambda r: r["ceiling"]["ceiling"]), col(lambda r: r["ceiling"]["one_task_cpu_s"])
    ceil_path = col(lambda r: r["ceiling"]["critical_path_s"])
    ratio = {k: col(lambda r, k=k: r["ratios"][k]) for k in ("floor", "floor_cpu", "broker", "broker_cpu", "split")}
    s0, f0, sp0 = runs[0]["single"], runs[0]["floor"], runs[0]["split"]
    kept_ok = all(r["broker"]["kept"] == r["single"]["kept"] for r in runs)
    equal = all(r["split"]["equal"] for r in runs)
    mem_split = [r["split"]["split_rss_anon_above_idle"] for r in runs]
    mem_one = [r["split"]["one_task_rss_anon_above_idle"] for r in runs]
    budget = {"split": min(r["split"]["map_budget"] or 0 for r in runs),
              "one_task": min(r["split"]["one_task_map_budget"] or 0 for r in runs)}

    def mem_cell(values: List[Optional[int]], which: str) -> str:
        known = [v for v in values if v is not None]
        growth = max(r["split"]["workers"][which].get("anon_growth", 0) for r in runs)
        if not known:
            return "— (not reported)"
        worst = max(known)
        return (f"**{_mib(worst)} MiB** (largest of {n}){_each([v / MIB for v in known], '.1f')}; "
                f"cross-check, a Python worker's RssAnon growth since first seen (its imports included), sampled from /proc: {_mib(growth)} MiB")

    def met(values: List[Optional[int]], which: str) -> str:
        return "yes" if all(v is not None and v <= budget[which] + MEMORY_MARGIN for v in values) else "**no**"

    lines = [
        f"Issue 34, one run ({n} repetition(s), medians; each repetition's value in brackets): "
        f"{s0['bytes'] / 1e6:,.0f} MB of *mixed* `.log`, {s0['records']:,} records → {s0['kept']:,} kept; "
        f"{result['cpus']} CPUs, Python {result['python']}; load average {' '.join(f'{x:.2f}' for x in result['load_start'])} "
        f"at start, {' '.join(f'{x:.2f}' for x in result['load_end'])} at end; {result['wall_s']:.0f} s in all.",
        "",
        "| step (run order) | measured: median wall s (CPU s) | ratio (median) | target | met? | load (1 min) before, per rep |",
        "|---|---|---|---|---|---|",
        f"| 1. `clean_partition`, 4 partitions, this process | {_med(single_w):.2f}{_each(single_w, '.2f')} "
        f"({_med(single_c):.2f}); {s0['bytes'] / 1e6 / _med(single_w):,.0f} MB/s | | | | {_loads(runs, 'clean_partition')} |",
        f"| 2. codec floor of the same round (decompress + compress + write) | {_med(floor_w):.2f}{_each(floor_w, '.2f')} "
        f"({_med(floor_c):.2f}); rep 1: {f0['decompress_s']:.2f} + {f0['compress_s']:.2f} + {f0['write_s']:.2f} | "
        f"**clean_partition ÷ floor {_med(ratio['floor']):.2f}**{_each(ratio['floor'], '.2f')}; "
        f"CPU {_med(ratio['floor_cpu']):.2f} | ≥ 0.67 | {'yes' if _med(ratio['floor']) >= 0.67 else 'no'} | "
        f"{_loads(runs, 'floor')} |",
        f"| 3. the broker's cleaner thread (Kafka 4.4.0), same bytes | {_med(br_w):.2f}{_each(br_w, '.1f')} "
        f"({_med(br_c):.2f}); kept {'= ours' if kept_ok else '**≠ ours**'} | **clean_partition ÷ broker "
        f"{_med(ratio['broker']):.2f}×**{_each(ratio['broker'], '.2f')}; CPU {_med(ratio['broker_cpu']):.2f}× | ≥ 5× | "
        f"{'yes' if _med(ratio['broker']) >= 5 else 'no'} | {_loads(runs, 'broker')} |",
        f"| 4. one partition ({sp0['bytes'] / 1e6:,.0f} MB, *big*) by the job on local[2]: compact stage, one task / "
        f"split ({sp0['slices']} slices, {sp0['groups']} groups), each net of the same job's stage on *tiny* "
        f"(its fixed cost: {_med(fixed_one):.1f} / {_med(fixed_split):.1f} s) | {_med(one_s):.2f}{_each(one_s, '.1f')} / "
        f"{_med(split_s):.2f}{_each(split_s, '.1f')} net; bytes {'equal' if equal else '**differ**'} | "
        f"**one task ÷ split (speed-up) {_med(ratio['split']):.2f}×**{_each(ratio['split'], '.2f')}; raw stages "
        f"{_med(raw):.2f}× | ≥ 1.6× | "
        f"{'yes' if _med(ratio['split']) >= 1.6 and equal else 'no'} | {_loads(runs, 'split')} |",
        f"| 4b. the split's ceiling on 2 cores, Spark left out: the round's pieces timed in one process "
        f"(`bench/split_ceiling.py`), one task ÷ their 2-core critical path | {_med(ceil_one):.2f} CPU s / "
        f"{_med(ceil_path):.2f} s (plan + slowest slice + groups on 2 cores + swap) | {_med(ceil):.2f}×"
        f"{_each(ceil, '.2f')} | (≥ 1.6×) | {'yes' if _med(ceil) >= 1.6 else 'no'} | {_loads(runs, 'ceiling')} |",
        f"| 5. memory: the split round's `rss_anon_above_idle_bytes` (its largest slice or group task), step 4's "
        f"report | {mem_cell(mem_split, 'split')} | | ≤ key-map budget {_mib(budget['split'])} + 64 MiB | "
        f"{met(mem_split, 'split')} | (step 4) |",
        f"| 5. memory: the one task's `rss_anon_above_idle_bytes`, step 4's report | {mem_cell(mem_one, 'one_task')} "
        f"| | ≤ key-map budget {_mib(budget['one_task'])} + 64 MiB | {met(mem_one, 'one_task')} | (step 4) |",
    ]
    return "\n".join(lines)


__all__ = ["STEPS", "one_rep", "render", "run"]
