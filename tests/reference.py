"""Small, independent reference implementations of SPEC's record-at-a-time semantics, in plain
Python, for the randomized tests. They know nothing of Spark, Delta or the macros."""

from __future__ import annotations

from typing import Optional

Left = dict[str, tuple[str, Optional[str]]]    # k -> (v, fk)
Right = dict[str, str]                          # rk -> rv


def foreign_key_join(left: Left, right: Right, join_type: str, output_key: str) -> dict:
    """SPEC §2: the output after a run, keyed by k, or by (fk, k) with the combined key.
    Values are (v, fk, rv)."""
    out: dict = {}
    referenced = set()
    for k, (v, fk) in left.items():
        rv = right.get(fk) if fk is not None else None
        if fk is not None and fk in right:
            referenced.add(fk)
        if join_type == "inner" and rv is None:
            continue
        out[(fk, k) if output_key == "combined" else k] = (v, fk, rv)
    if join_type == "outer":
        for rk, rv in right.items():
            if rk not in referenced:
                out[(rk, None)] = (None, None, rv)
    return out


def changed_keys(before: dict, after: dict) -> set[tuple[str, object]]:
    """What an exact change feed holds between two states: (change type, key) per changed row."""
    out = set()
    for key in before.keys() | after.keys():
        if key not in after:
            out.add(("delete", key))
        elif key not in before:
            out.add(("insert", key))
        elif before[key] != after[key]:
            out.add(("update_postimage", key))
    return out


def changelog_state(events: list[tuple[str, Optional[str], str, int, int]]) -> dict:
    """SPEC §1: events (id, name, op, lsn, offset) in arrival order -> {id: (lsn, (name, lsn) or
    None for a tombstone)}, the last applied event of each key. An event applies when its sequence
    is at least the key's last applied one (a later arrival wins a tie); a delete's sequence stays
    as a tombstone."""
    last: dict[str, tuple[int, Optional[tuple]]] = {}
    for id_, name, op, lsn, _ in events:
        if id_ in last and lsn < last[id_][0]:
            continue
        last[id_] = (lsn, None if op == "d" else (name, lsn))
    return last


def changelog_table(events: list[tuple[str, Optional[str], str, int, int]]) -> dict:
    """The current-state table after `events`: {id: (name, lsn)}."""
    return {k: row for k, (_, row) in changelog_state(events).items() if row is not None}


def changelog_run_counts(before: list, run: list) -> tuple[int, int]:
    """A run of the events `run` after the events `before`: (keys it changes, keys whose every
    event of the run is older than the key's last applied one — late, ignored)."""
    last = changelog_state(before)
    keys = {id_ for id_, *_ in run}
    applied = {id_ for id_, _, _, lsn, _ in run if id_ not in last or lsn >= last[id_][0]}
    return len(applied), len(keys - applied)


Record = tuple   # (part, k, id, ts_seconds, offset) in arrival order


def deduplicate(records: list, interval: float, by_key: bool = True, by_id: bool = False) -> list:
    """SPEC §3, record at a time: the offsets of the forwarded records. Stream time per part."""
    stream_time: dict = {}
    store: dict = {}
    forwarded = []
    for part, k, id_, ts, offset in records:
        st = stream_time[part] = max(stream_time.get(part, ts), ts)
        dk = (part, k if by_key else None, id_ if by_id else None)
        if (by_key and k is None) or (by_id and id_ is None):
            forwarded.append(offset)
            continue
        s = store.get(dk)
        if s is None or st - s > interval or s - ts > interval:
            forwarded.append(offset)
            if ts >= st - interval:
                store[dk] = ts
        for key in [key for key, v in store.items() if key[0] == part and v < st - interval]:
            del store[key]
    return forwarded


def distinct(records: list, size: float, session: bool) -> list:
    """Seed 002's windowed distinct: offsets of the first record per key and window (tumbling,
    epoch-aligned, `size` long) or per session (records no more than `size` apart, inclusive),
    keys per partition."""
    seen: dict = {}
    forwarded = []
    for part, k_, _, ts, offset in records:
        if k_ is None:                      # as in KIP-655: a null key is forwarded, never stored
            forwarded.append(offset)
            continue
        k = (part, k_)
        if not session:
            window = ts // size
            if window not in seen.setdefault(k, set()):
                seen[k].add(window)
                forwarded.append(offset)
            continue
        sessions = seen.setdefault(k, [])
        touched = [s for s in sessions if s[0] - size <= ts <= s[1] + size]
        if not touched:
            forwarded.append(offset)
        rest = [s for s in sessions if s not in touched]
        seen[k] = rest + [(min([ts] + [s[0] for s in touched]), max([ts] + [s[1] for s in touched]))]
    return forwarded


class StreamTableJoin:
    """SPEC §4, record at a time, with run-level interleaving: a run's table changes are applied
    (in arrival order) before its stream records are processed (in arrival order).

    Table changes: (key, ts, value) — value None is a tombstone. Stream records: (key, ts, value,
    offset) — value None is a null-value record. Times in seconds. retention None = unversioned
    table (a lookup sees the key's latest arrived value); grace None = no buffer.
    Emitted: (offset, joined value or None), in emission order."""

    def __init__(self, join_type: str, retention: Optional[float], grace: Optional[float]) -> None:
        self.join_type, self.retention, self.grace = join_type, retention, grace
        self.history: dict = {}          # key -> {ts: value}
        self.latest_arrived: dict = {}   # key -> value (unversioned)
        self.table_time: Optional[float] = None
        self.stream_time: Optional[float] = None
        self.buffer: list = []           # (ts, key, arrival, record)
        self.arrivals = 0
        self.emitted: list = []
        self.ignored_changes = 0         # older than the horizon
        self.null_key_changes = 0

    def horizon(self) -> Optional[float]:
        if self.retention is None or self.table_time is None:
            return None
        return self.table_time - self.retention

    def apply(self, key, ts: float, value) -> None:
        if key is None:   # Kafka Streams' table source drops it: no version, no table time
            self.null_key_changes += 1
            return
        if self.retention is None:
            self.latest_arrived[key] = value
            return
        horizon = self.horizon()
        if horizon is not None and ts < horizon:
            self.ignored_changes += 1
            return
        self.history.setdefault(key, {})[ts] = value
        self.table_time = ts if self.table_time is None else max(self.table_time, ts)
        self.purge()

    def purge(self) -> None:
        """A version whose validity ended at or before the horizon goes, but never a key's latest."""
        horizon = self.horizon()
        for versions in self.history.values():
            times = sorted(versions)
            for ts, next_ts in zip(times, times[1:]):
                if next_ts <= horizon:
                    del versions[ts]

    def lookup(self, key, t: float):
        if key is None:
            return None
        if self.retention is None:
            return self.latest_arrived.get(key)
        versions = self.history.get(key, {})
        if not versions:
            return None
        horizon = self.horizon()
        if horizon is not None and t < horizon:
            latest = max(versions)
            return versions[latest] if latest <= t else None
        before = [ts for ts in versions if ts <= t]
        return versions[max(before)] if before else None

    def join(self, record) -> None:
        key, ts, _, offset = record
        found = self.lookup(key, ts)
        if found is not None or self.join_type == "left":
            self.emitted.append((offset, found))

    def process(self, record) -> None:
        key, ts, value, _ = record
        if value is None or (key is None and self.join_type == "inner"):
            return
        if self.grace is None:
            self.join(record)
            return
        if self.stream_time is not None and ts < self.stream_time - self.grace:
            self.join(record)   # late: at once, releasing nothing
            return
        self.arrivals += 1
        self.buffer.append((ts, (0, 0) if key is None else (1, key), self.arrivals, record))   # null keys first
        self.stream_time = ts if self.stream_time is None else max(self.stream_time, ts)
        released = sorted(b for b in self.buffer if b[0] <= self.stream_time - self.grace)
        self.buffer = [b for b in self.buffer if b[0] > self.stream_time - self.grace]
        for *_, r in released:
            self.join(r)

    def run(self, table_changes: list, records: list) -> None:
        for change in table_changes:
            self.apply(*change)
        for record in records:
            self.process(record)
