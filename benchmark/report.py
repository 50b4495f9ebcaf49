"""The benchmark's report from its raw figures: report.md (tables, targets, the fallback threshold
the measurements support) and two plots (time per run vs change fraction, vs size)."""

from __future__ import annotations

from pathlib import Path


def label(size: int) -> str:
    return f"{size // 1_000_000}M" if size % 1_000_000 == 0 else f"{size // 1000}k"


def pct(f: float) -> str:
    return f"{f * 100:g}%"


def find(rows: list, **where) -> dict | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in where.items())), None)


def secs(row: dict | None) -> str:
    return "—" if row is None else f"{row['seconds']:.1f}"


def ratio(a: dict | None, b: dict | None) -> float | None:
    return None if a is None or b is None or not b["seconds"] else a["seconds"] / b["seconds"]


def fmt(x: float | None, unit: str = "x") -> str:
    return "—" if x is None else f"{x:.1f}{unit}" if x >= 10 else f"{x:.2f}{unit}"


def table(header: list[str], lines: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return out


def fk_section(rows: list, sizes: list, fractions: list) -> list[str]:
    lines = []
    for size in sizes:
        for f in fractions:
            w = dict(operator="foreign_key_join", size=size, fraction=f)
            full, inc = find(rows, **w, method="full rebuild"), find(rows, **w, method="incremental")
            path, naive = find(rows, **w, method="full-recompute path"), find(rows, **w, method="naive dbt incremental")
            floor = find(rows, **w, method="MERGE floor")
            if inc is None:
                continue
            written = inc["rows_written"] + inc.get("state_rows_written", 0)
            lines.append([label(size), pct(f), f"{inc['rows_changed']:,}", f"{inc['affected_keys']:,}", secs(full), secs(inc),
                          fmt(ratio(full, inc)), secs(path), secs(naive), f"{naive['wrong_rows']:,}" if naive else "—",
                          secs(floor), fmt(ratio(inc, floor)),
                          f"{inc['rows_written']:,} + {inc.get('state_rows_written', 0):,}",
                          fmt(written / inc["rows_changed"] if inc["rows_changed"] else None),
                          f"{inc['peak_mb']:,.0f}"])
    return table(["left rows", "changed", "output rows changed", "affected keys", "full rebuild s", "incremental s",
                  "speed-up", "full-recompute path s", "naive incr. s", "naive wrong rows", "MERGE floor s",
                  "incr. / floor", "rows written (output + index)", "written / changed", "peak driver MB"], lines)


def stream_section(rows: list, sizes: list, fractions: list, operator: str, baselines: list[str]) -> list[str]:
    lines = []
    for size in sizes:
        for f in fractions:
            w = dict(operator=operator, size=size, fraction=f)
            inc = find(rows, **w, method="incremental")
            if inc is None:
                continue
            line = [label(size), pct(f), f"{inc['new_records']:,}", f"{inc['rows_changed']:,}", secs(inc)]
            for name in baselines:
                base = find(rows, **w, method=name)
                line += [secs(base), fmt(ratio(base, inc))]
            sss = find(rows, **w, method="Structured Streaming")
            if sss is not None:
                line.append(f"{sss['differs_from_kip655']:,}")
            line += [f"{inc['rows_written']:,} + {inc.get('state_rows_written', 0):,}", f"{inc['peak_mb']:,.0f}"]
            lines.append(line)
    header = ["stream rows", "new data", "new records", "rows appended", "incremental s"]
    for name in baselines:
        header += [f"{name} s", f"{name} / incr."]
    if operator == "deduplicate":
        header.append("Structured Streaming rows differing from KIP-655")
    header += ["rows written (output + state)", "peak driver MB"]
    return table(header, lines)


def threshold(rows: list, size: int, fractions: list) -> tuple[float | None, list[str]]:
    """The affected fraction above which the full-recompute path is cheaper than the incremental
    one, interpolated between the measured rounds (None: never within the measured range)."""
    points = []
    for f in fractions:
        w = dict(operator="foreign_key_join", size=size, fraction=f)
        inc, path = find(rows, **w, method="incremental"), find(rows, **w, method="full-recompute path")
        if inc and path:
            points.append((inc["affected_keys"] / (size * 1.0), inc["seconds"], path["seconds"]))
    notes = [f"affected {a:.2%}: incremental {i:.1f} s, full-recompute path {p:.1f} s" for a, i, p in points]
    for (a0, i0, p0), (a1, i1, p1) in zip(points, points[1:]):
        if i0 <= p0 and i1 > p1:
            d0, d1 = p0 - i0, i1 - p1
            return a0 + (a1 - a0) * d0 / (d0 + d1), notes
    if points and points[0][1] > points[0][2]:
        return points[0][0], notes
    return None, notes


def targets(rows: list, sizes: list) -> list[str]:
    big, small = max(sizes), min(sizes)
    fk = dict(operator="foreign_key_join", size=big)
    out = []

    def line(name: str, goal: str, value: float | None, ok: bool | None) -> None:
        out.append([name, goal, fmt(value), "—" if ok is None else ("met" if ok else "**missed**")])

    for f, goal in ((0.01, 15), (0.001, 40)):
        r = ratio(find(rows, **fk, fraction=f, method="full rebuild"), find(rows, **fk, fraction=f, method="incremental"))
        line(f"FK join {label(big)}, {pct(f)} change: full rebuild / incremental", f">= {goal}x", r, None if r is None else r >= goal)
    if big == 10 * small:
        r = ratio(find(rows, operator="foreign_key_join", size=big, fraction=0.001, method="incremental"),
                  find(rows, operator="foreign_key_join", size=small, fraction=0.01, method="incremental"))
        line(f"same absolute change: {label(big)} at 0.1% / {label(small)} at 1%", "<= 1.5x", r, None if r is None else r <= 1.5)
    worst_floor, worst_written = None, None
    for r in rows:
        if r.get("operator") == "foreign_key_join" and r.get("method") == "incremental" and r["fraction"] <= 0.1:
            floor = find(rows, operator="foreign_key_join", size=r["size"], fraction=r["fraction"], method="MERGE floor")
            x = ratio(r, floor)
            worst_floor = x if worst_floor is None or (x and x > worst_floor) else worst_floor
            if r["rows_changed"]:
                w = (r["rows_written"] + r.get("state_rows_written", 0)) / r["rows_changed"]
                worst_written = w if worst_written is None or w > worst_written else worst_written
    line("FK incremental / MERGE floor (worst, change <= 10%)", "<= 2x", worst_floor, None if worst_floor is None else worst_floor <= 2)
    line("FK rows written (output + index) / output rows changed (worst, change <= 10%)", "<= 2x", worst_written,
         None if worst_written is None else worst_written <= 2)
    worst = None
    for r in rows:
        if r.get("operator") == "deduplicate" and r.get("method") == "incremental":
            x = ratio(r, find(rows, operator="deduplicate", size=r["size"], fraction=r["fraction"], method="Structured Streaming"))
            worst = x if worst is None or (x and x > worst) else worst
    line("dedup incremental / Structured Streaming (worst)", "<= 1.0x", worst, None if worst is None else worst <= 1.0)
    stj = max((r["size"] for r in rows if r.get("operator") == "stream_table_join"), default=big)
    r = ratio(find(rows, operator="stream_table_join", size=stj, fraction=0.01, method="full as-of recompute"),
              find(rows, operator="stream_table_join", size=stj, fraction=0.01, method="incremental"))
    line(f"stream-table join {label(stj)}, 1% new: full as-of recompute / incremental", ">= 10x", r, None if r is None else r >= 10)
    return table(["target", "goal", "measured", ""], out)


def plots(rows: list, sizes: list, fractions: list, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("foreign_key_join", ["incremental", "full rebuild", "full-recompute path", "naive dbt incremental", "MERGE floor"]),
              ("deduplicate", ["incremental", "full rebuild", "Structured Streaming"]),
              ("stream_table_join", ["incremental", "full as-of recompute"])]
    def figure(name: str, xlabel: str, series) -> None:
        """One panel per operator; `series(op, method)` yields (label, style, [(x, seconds)])."""
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
        for ax, (op, methods) in zip(axes, panels):
            for method in methods:
                for name_, style, pts in series(op, method):
                    if pts:
                        ax.plot(*zip(*pts), style, marker="o", label=name_)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("seconds per run")
            ax.set_title(op)
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)

    def seconds(op, method, points):
        return [(x, r["seconds"]) for x, r in ((x, find(rows, operator=op, method=method, **w)) for x, w in points) if r]

    figure("time_vs_fraction.png", "changed / new data, % of rows", lambda op, method: [
        (f"{method} ({label(size)})", style, seconds(op, method, [(f * 100, dict(size=size, fraction=f)) for f in fractions]))
        for size, style in zip(sorted(sizes, reverse=True), ["-", "--", ":"])])
    figure("time_vs_size.png", "rows (left / stream)", lambda op, method: [
        (f"{method} ({pct(f)})", style, seconds(op, method, [(s, dict(size=s, fraction=f)) for s in sorted(sizes)]))
        for f, style in zip([0.01, 0.001], ["-", "--"])])
    return ["time_vs_fraction.png", "time_vs_size.png"]


def run_lines(results: dict) -> list[str]:
    """Which run each size comes from: date, machine, commit, seed, duration."""
    return [f"- {', '.join(label(s) for s in r['sizes'])} rows at {', '.join(pct(f) for f in r['fractions'])} "
            f"({', '.join(r.get('operators') or ['all operators'])}): "
            f"run {r['started'][:16].replace('T', ' ')} UTC on {r['machine']}; Spark {r['spark']} local, driver memory "
            f"{r['driver_memory']}; commit {r['commit']}; seed {r['seed']}; whole run {r['minutes']} min."
            for r in results.get("runs") or [results]]


def merge_phase_section(rows: list, sizes: list, fractions: list) -> list[str]:
    """foreign_key_join's output MERGE phase by phase (benchmark.merge_phases), for the operator's
    runs and the MERGE floor: what the operator's MERGE costs beyond the floor's, and how much of
    the run lies outside its MERGE."""
    lines = []
    for size in sizes:
        for f in fractions:
            for method in ("incremental", "full-recompute path", "MERGE floor"):
                row = find(rows, operator="foreign_key_join", size=size, fraction=f, method=method)
                p = (row or {}).get("merge_phases")
                if p:
                    lines.append([label(size), pct(f), method] + [f"{p[k]:.2f}" for k in ("source", "scan", "rewrite", "merge")]
                                 + [secs(row), f"{row['seconds'] - p['merge']:.1f}"])
    if not lines:
        return []
    return (["### The output MERGE, phase by phase", "",
             "From Delta's operation metrics of the MERGE into the output: `source` computes and materializes "
             "the MERGE's source (the operator's: the model body over the affected rows and the rows to delete; "
             "the floor's is a table of the changed rows, read as it is), `scan` finds the output files that "
             "hold a matching row, `rewrite` writes the changed rows and the deletion vectors (it joins the "
             "source with every row of those files). `outside` is the rest of the run: planning, the "
             "fan-out, the checks and the bookkeeping writes.", ""]
            + table(["left rows", "changed", "method", "source s", "scan s", "rewrite s", "MERGE s", "run s", "outside s"], lines)
            + [""])


def crossover_lines(rows: list, sizes: list, fractions: list) -> list[str]:
    out = []
    for size in sizes:
        value, notes = threshold(rows, size, fractions)
        out.append(f"- Fallback crossover at {label(size)}: "
                   + (f"incremental is dearer than the full-recompute path above about {value:.0%} affected left rows"
                      if value is not None else "the incremental path stayed cheaper at every measured fraction")
                   + " (" + "; ".join(notes) + ").")
    return out


def profile_section(rows: list, sizes: list, fractions: list) -> list[str]:
    """Where each operator's incremental run (and foreign_key_join's full-recompute path) spends its
    time, per size, in the 1% round (or the smallest fraction measured): its statements, largest
    first (benchmark.Statements)."""
    fraction = 0.01 if 0.01 in fractions else min(fractions)
    out = []
    runs = [(op, "incremental") for op in ("foreign_key_join", "deduplicate", "stream_table_join")]
    for operator, method in runs + [("foreign_key_join", "full-recompute path")]:
        for size in sizes:
            row = find(rows, operator=operator, size=size, fraction=fraction, method=method)
            p = (row or {}).get("profile")
            if not p:
                continue
            share = lambda s: f"{s / p['seconds']:.0%}" if p["seconds"] else "—"  # noqa: E731
            lines = [[f"{s:.2f}", share(s), n, "`` " + text.replace("|", "\\|") + " ``"] for text, s, n in p["top"]]
            if p["rest"][1]:
                lines.append([f"{p['rest'][0]:.2f}", share(p["rest"][0]), p["rest"][1], "the other statements"])
            what = operator if method == "incremental" else f"{operator}, {method}"
            out += [f"### {what}, {label(size)}, {pct(fraction)} ({p['seconds']:.1f} s in {p['statements']} statements)", ""]
            out += table(["s", "share", "statements", "statement (first 80 characters)"], lines) + [""]
    if out:
        out = ["## Where an incremental run's time goes", "",
               "Each statement of the run timed from dbt sending it to the next one (fetching its result "
               "included), from dbt's events; statements whose first 80 characters match are summed (the "
               "highwater's pin and advance, for one).", ""] + out
    return out


README_START, README_END = "<!-- benchmark:figures -->", "<!-- benchmark:figures:end -->"


def readme_figures(results: dict) -> list[str]:
    """What README.md shows of the report: the runs, the targets, foreign_key_join per round and
    the fallback crossover (the rest stays in report.md)."""
    rows, sizes, fractions = results["rows"], results["sizes"], results["fractions"]
    return (run_lines(results) + [""] + targets(rows, sizes) + ["", "foreign_key_join per round:", ""]
            + fk_section(rows, sizes, fractions) + [""] + crossover_lines(rows, sizes, fractions))


def update_readme(readme: Path, results: dict) -> None:
    """Replace the figures between README's two markers by this report's."""
    text = readme.read_text()
    start, end = text.index(README_START) + len(README_START), text.index(README_END)
    readme.write_text(text[:start] + "\n" + "\n".join(readme_figures(results)) + "\n" + text[end:])


def write_report(results: dict, out: Path) -> None:
    rows, sizes, fractions = results["rows"], results["sizes"], results["fractions"]
    out.mkdir(parents=True, exist_ok=True)
    images = plots(rows, sizes, fractions, out)
    runs = results.get("runs") or [results]
    md = [f"# Benchmark report — {max(r['started'] for r in runs)[:10]}", ""] + run_lines(results)
    md += ["", "Seconds are dbt's execution time of one model run (parsing excluded) or the Spark job's wall "
           "time; every incremental result was checked equal to the full rebuild in the same round.", ""]
    md += ["## Targets", ""] + targets(rows, sizes) + [""]
    md += ["## foreign_key_join (orders -> customers, left join; customers = 10% of orders)", "",
           "Each round changes the given fraction of both inputs (updates, foreign-key moves, deletes, "
           "inserts); affected keys = changed orders + orders of changed customers (CombinedKey index). "
           "`naive wrong rows`: rows of the `incremental`+`merge` model filtered on `updated_at` that "
           "differ from the full rebuild (missed customer changes and deletes, accumulated).", ""]
    md += fk_section(rows, sizes, fractions) + [""] + crossover_lines(rows, sizes, fractions) + [""]
    md += merge_phase_section(rows, sizes, fractions)
    md += ["", "## deduplicate (KIP-655 by message id, 10 minutes; 10% redeliveries, 1% late by 30 min)", ""]
    md += stream_section(rows, sizes, fractions, "deduplicate", ["full rebuild", "Structured Streaming"]) + [""]
    md += ["Structured Streaming's `dropDuplicatesWithinWatermark` (watermark 10 minutes, `availableNow`) "
           "drops records behind the watermark and expires state on the watermark, so its output differs "
           "from KIP-655's rule; the column counts the differing rows.", ""]
    md += ["## stream_table_join (purchases -> prices as of purchase time; grace 1 minute; 1% late up to 5 min)", ""]
    md += stream_section(rows, sizes, fractions, "stream_table_join", ["full as-of recompute"]) + [""]
    md += profile_section(rows, sizes, fractions)
    md += ["## Initial builds", ""]
    md += table(["rows", "what", "seconds", "peak driver MB"],
                [[label(r["size"]), r["method"], f"{r['seconds']:.1f}", f"{r['peak_mb']:,.0f}"]
                 for r in rows if r["fraction"] == 0.0]) + [""]
    md += [f"![{name}]({name})" for name in images]
    (out / "report.md").write_text("\n".join(md) + "\n")
