"""A partition's last stable offset (Kafka's ``ProducerStateManager.firstUnstableOffset`` bounded by the high
watermark, ``UnifiedLog.lastStableOffset``) and its aborted transactions, replayed from the files.

The broker keeps the ongoing transactions in memory; offline they are replayed from every batch header
below ``upper`` and the control records' types (a transactional data batch opens its producer's
transaction, a COMMIT or ABORT marker closes it): the LSO is the first offset of the earliest
transaction still open, else ``upper``. What a ``read_committed`` client is answered and reads up to.
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import numpy as np

from kafkalog.format import control_record
from kafkalog.format.file_records import scan_batches
from kafkalog.index.builder import replay_transactions
from kafkalog.index.transaction_index import AbortedTxn
from kafkalog.log.records_io import iter_segment


def replay_below(segments: Sequence[Tuple[int, str]], upper: int) -> Tuple[int, Tuple[AbortedTxn, ...]]:
    """(last stable offset, aborted transactions) of the batches below ``upper``.

    Parameters:
        segments: (base offset, .log path) of each segment, in offset order.
        upper: the bound (exclusive), the high watermark for a client's view.
    """
    aborted, still_open = transactions_below(segments, upper)
    return min([upper] + list(still_open.values())), aborted


def transactions_below(segments: Sequence[Tuple[int, str]],
                       upper: int) -> Tuple[Tuple[AbortedTxn, ...], Dict[int, int]]:
    """(aborted transactions, {producer id: first offset} of the transactions still open) of the
    batches below ``upper``: open = a transactional data batch below ``upper`` and no marker of its
    producer after it below ``upper`` (the as-of tables drop those, ``kafkalog.source.as_of``).

    Parameters:
        segments: (base offset, .log path) of each segment, in offset order.
        upper: the bound (exclusive).
    """
    columns: Dict[str, list] = {k: [] for k in ("base_offset", "producer_id", "is_transactional", "is_control",
                                                "control_type")}
    for base_offset, log in segments:
        if base_offset >= upper:
            break
        table = scan_batches(log, verify_crc=False, on_corrupt="stop").batches
        if table.num_rows == 0:
            continue
        base = table.column("baseOffset").to_numpy()
        keep = base < upper
        pids = table.column("producerId").to_numpy()[keep]
        txn = table.column("isTransactional").to_numpy(zero_copy_only=False)[keep]
        ctrl = table.column("isControl").to_numpy(zero_copy_only=False)[keep]
        pos = table.column("position").to_numpy()[keep]
        size = table.column("size").to_numpy()[keep]
        types = np.full(len(pids), -1, np.int64)
        for i in np.flatnonzero(ctrl & (pids >= 0)).tolist():
            for rows in iter_segment(log, start=int(pos[i]), end=int(pos[i] + size[i]), verify_crc=False):
                if rows.num_rows:
                    types[i] = control_record.parse_control_type(rows.column("key")[0].as_py())
                    break
        columns["base_offset"].extend(base[keep].tolist())
        columns["producer_id"].extend(pids.tolist())
        columns["is_transactional"].extend(txn.tolist())
        columns["is_control"].extend(ctrl.tolist())
        columns["control_type"].extend(types.tolist())
    aborted, still_open = replay_transactions(batches={k: np.asarray(v) for k, v in columns.items()})
    return tuple(aborted), dict(still_open)
