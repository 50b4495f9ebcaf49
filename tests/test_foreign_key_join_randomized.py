"""foreign_key_join against the Python reference (tests/reference.py): random inserts, updates and
deletes on both sides, FK moves and nulls, applied over random run boundaries. After every run,
every model equals the reference and its change feed holds exactly the rows whose value changed;
a full refresh and a crashed-then-retried run give the same result. The randomized runs key both
tables by bigint (negative, beyond int, the type's largest) when the seed is odd — CI's seed 7 —
and by string (keys that differ only in case, a quote, a backslash) when it is even; the crash test
by string: a run's key ranges prune the output and the index, and those ranges are written as
literals of the key's type."""

from __future__ import annotations

import random

import pytest

import reference
from fk_join_harness import CRASH_STEPS, MODELS, FkJoinProject, error_of, failing_at, key_type_of, random_seeds, runnable_models

# Per key type: left keys, right keys, a foreign key no right row has, and a right key no left row
# references.
KEYS = {
    # Keys that differ only in case, a quote and a backslash: the lookup names keys as literals.
    "string": (["k0", "K0", *[f"k{i}" for i in range(1, 7)]], ["r0", "R0", "r1", "it's", "back\\slash"], "r9", "r8"),
    "bigint": ([-2**40, -7, 0, 12, 2**31, 2**33 + 5, 2**62, 2**63 - 1],
               [-2**63, 3, 2**31 - 1, 2**32, 2**63 - 1], 99, 2**62 + 1),
}
RANDOM_MODELS = runnable_models(tuple(MODELS))


class World:
    """The inputs as the reference sees them, changed in step with the Delta tables."""

    def __init__(self, fk: FkJoinProject, rng: random.Random, key_type: str) -> None:
        self.fk, self.rng = fk, rng
        self.left_keys, self.right_keys, self.missing, self.unreferenced = KEYS[key_type]
        self.left: reference.Left = {}
        self.right: reference.Right = {}
        self.left_changed = False   # since the last run

    def random_change(self) -> None:
        rng = self.rng
        op = rng.choice(["put_left", "put_left", "put_left", "delete_left", "put_right", "put_right", "delete_right"])
        if op == "put_left":
            self.put_left(*[(k, rng.choice("abc"), rng.choice(self.right_keys + [self.missing, None]))
                            for k in rng.sample(self.left_keys, rng.randint(1, 3))])
        elif op == "put_right":
            self.put_right(*[(rk, rng.choice("xyz")) for rk in rng.sample(self.right_keys, rng.randint(1, 2))])
        elif op == "delete_left" and self.left:
            self.delete_left(rng.choice(sorted(self.left)))
        elif op == "delete_right" and self.right:
            rk = rng.choice(sorted(self.right))
            self.fk.delete_right(rk)
            del self.right[rk]

    def put_left(self, *rows) -> None:
        self.fk.put_left(*rows)
        self.left.update({k: (v, f) for k, v, f in rows})
        self.left_changed = True

    def put_right(self, *rows) -> None:
        self.fk.put_right(*rows)
        self.right.update(dict(rows))

    def delete_left(self, k) -> None:
        self.fk.delete_left(k)
        del self.left[k]
        self.left_changed = True

    def churn_left(self) -> None:
        """Every left key put with another value and another foreign key (no draw from the rng)."""
        rows, rks = [], self.right_keys
        for k in self.left_keys:
            v, f = self.left.get(k, ("c", None))
            rows.append((k, {"a": "b", "b": "c", "c": "a"}[v], rks[(rks.index(f) + 1) % len(rks)] if f in rks else rks[0]))
        self.put_left(*rows)

    def expected(self, model: str) -> dict:
        join_type, output_key, _ = MODELS[model]
        return reference.foreign_key_join(self.left, self.right, join_type, output_key)


@pytest.mark.parametrize("seed", random_seeds(7))
def test_random_changes_over_random_runs_match_the_reference(scratch_project, spark, seed):
    rng = random.Random(seed)
    key_type = key_type_of(seed)
    fk = FkJoinProject.create(scratch_project, spark, models=RANDOM_MODELS, key_type=key_type)
    world = World(fk, rng, key_type)
    before = {m: {} for m in RANDOM_MODELS}
    index_entries: dict[str, int] = {}
    compacted: dict[str, bool] = {}
    shrunk = False
    for run in range(6):
        if run == 1:
            # A run whose only change is a right row no left row references: it affects no left
            # key (an empty key set bounds nothing), and adds a row to the outer joins only.
            world.put_right((world.unreferenced, "w"))
        elif run >= 2 and not shrunk:
            # Whatever the seed, one run (the third, or the fourth) only deletes a left row that
            # references a right key, so that the fallback models re-create their index with one
            # entry fewer (`compacted` below); the third puts one when there is none.
            referencing = sorted(k for k, (v, f) in world.left.items() if f is not None)
            if referencing:
                world.delete_left(referencing[0])
                shrunk = True
            else:
                world.put_left((world.left_keys[0], "a", world.right_keys[0]))
        else:
            for _ in range(rng.randint(1, 4)):   # several input commits between two runs
                world.random_change()
        if run >= 4 and not all(compacted.values()):
            # An index not compacted by now gets every left key changed in the last two runs:
            # 16 entries more for at most 8 left rows, above the 1.5x bound whatever the seed.
            world.churn_left()
        # Every other run lets the index compact as soon as it holds more entries than 1.5x the
        # left rows (the default waits for 10,000 more).
        slack = 0 if run % 2 else None
        fk.run(vars={"incremental_joins_index_slack": slack} if slack is not None else None)
        left_changed, world.left_changed = world.left_changed, False
        for model in RANDOM_MODELS:
            current, entries = fk.index(model)
            assert current == {k: f for k, (v, f) in world.left.items() if f is not None}, (
                f"seed {seed}, run {run}, {model}: index")
            if slack == 0 and left_changed:   # appended, then compacted if above the bound
                assert entries <= len(world.left) + len(world.left) // 2, (
                    f"seed {seed}, run {run}, {model}: {entries} index entries")
            compacted[model] = compacted.get(model, False) or entries < index_entries.get(model, 0)
            index_entries[model] = entries
            expected = world.expected(model)
            assert fk.output(model) == expected, f"seed {seed}, run {run}, {model}"
            assert fk.output_changes(model) == reference.changed_keys(before[model], expected), (
                f"seed {seed}, run {run}, {model}: change feed is not exactly the changed rows")
            before[model] = expected

    assert all(compacted.values()), f"seed {seed}: an index was never compacted: {compacted}"

    # --full-refresh rebuilds the same content.
    fk.run("--full-refresh")
    for model in RANDOM_MODELS:
        assert fk.output(model) == world.expected(model), f"full refresh, {model}"


def test_run_interrupted_at_each_step_then_rerun_equals_a_clean_run(scratch_project, spark):
    """One history: after a first run, a run interrupted at each step in turn (each after new
    changes, and each following a repaired run). A commit lands after each interrupted run: the
    re-run still reads the versions the interrupted run pinned, so it equals the reference as of
    those, and the next run catches up; the run after the last repaired one too."""
    rng = random.Random(11)
    fk = FkJoinProject.create(scratch_project, spark, models=("fk_left", "fk_outer"))
    world = World(fk, rng, "string")
    for _ in range(4):
        world.random_change()
    fk.run()
    for step in CRASH_STEPS:
        for _ in range(4):
            world.random_change()
        pinned = {model: world.expected(model) for model in ("fk_left", "fk_outer")}
        with failing_at(step):
            failed = fk.run(check=False)
        assert "injected failure at " + step in error_of(failed), step
        world.random_change()
        fk.run()
        for model in ("fk_left", "fk_outer"):
            assert fk.output(model) == pinned[model], f"{model} after a crash {step} and a re-run"
        fk.run()
        for model in ("fk_left", "fk_outer"):
            assert fk.output(model) == world.expected(model), f"{model}, the run after the re-run of {step}"
    # And the state is sound: the next changes are still applied correctly.
    for _ in range(3):
        world.random_change()
    fk.run()
    for model in ("fk_left", "fk_outer"):
        assert fk.output(model) == world.expected(model), f"{model}, the run after the repaired ones"
