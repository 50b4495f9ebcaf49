"""Drive a dbt project in-process (dbtRunner), as the demo, the tests and the benchmark do."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from dbt.cli.main import dbtRunner, dbtRunnerResult


class DbtCommandFailed(RuntimeError):
    def __init__(self, args: list[str], result: dbtRunnerResult) -> None:
        self.result = result
        messages = [
            f"{r.node.name}: {r.message}" if getattr(r, "node", None) else str(r.message)
            for r in getattr(result.result, "results", None) or []
            if str(r.status) in ("error", "fail")
        ]
        detail = "\n".join(messages) or str(result.exception)
        super().__init__(f"dbt {' '.join(args)} failed:\n{detail}")


@dataclass
class DbtProject:
    """A dbt project directory with its profile, run in this process."""

    path: Path
    target: str = "embedded"
    vars: dict[str, Any] = field(default_factory=dict)
    profiles_dir: Path | None = None
    # Called with every event dbt fires (dbtRunner's callbacks), e.g. to time each statement.
    callbacks: list[Callable[[Any], None]] = field(default_factory=list)

    def invoke(self, *args: str, vars: dict[str, Any] | None = None, check: bool = True) -> dbtRunnerResult:
        argv = [
            *args,
            "--project-dir", str(self.path),
            "--profiles-dir", str(self.profiles_dir or self.path),
            "--target", self.target,
        ]
        merged = {**self.vars, **(vars or {})}
        if merged and args[0] not in ("deps", "clean"):
            argv += ["--vars", json.dumps(merged)]
        result = dbtRunner(callbacks=self.callbacks).invoke(argv)
        if check and not result.success:
            raise DbtCommandFailed(argv, result)
        return result
