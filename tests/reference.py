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


def changelog_table(events: list[tuple[str, Optional[str], str, int, int]]) -> dict:
    """SPEC §1: events (id, name, op, lsn, offset) in arrival order -> {id: (name, lsn)}.
    An event applies when its sequence is at least the key's last applied one (a later arrival
    wins a tie); a delete's sequence stays as a tombstone."""
    last: dict[str, tuple[int, Optional[tuple]]] = {}
    for id_, name, op, lsn, _ in events:
        if id_ in last and lsn < last[id_][0]:
            continue
        last[id_] = (lsn, None if op == "d" else (name, lsn))
    return {k: row for k, (_, row) in last.items() if row is not None}
