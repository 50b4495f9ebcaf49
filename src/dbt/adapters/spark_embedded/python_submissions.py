"""Run a compiled dbt Python model in the current process's SparkSession."""

from __future__ import annotations

import linecache
import traceback
from typing import Any, Dict

from dbt.adapters.base import PythonJobHelper
from dbt.adapters.contracts.connection import Credentials
from dbt_common.exceptions import DbtRuntimeError


class SessionPythonJobHelper(PythonJobHelper):
    """`submission_method: session` — exec the model's compiled code with `spark` in scope."""

    def __init__(self, parsed_model: Dict, credentials: Credentials) -> None:
        self.model_name = parsed_model["name"]
        # Compile under the model's own path, so tracebacks point at the user's file and line.
        self.filename = parsed_model.get("original_file_path") or f"<{self.model_name}>"

    def submit(self, compiled_code: str) -> Any:
        from pyspark.sql import SparkSession

        # getOrCreate(), not getActiveSession(): the active session is thread-local and dbt runs
        # models in worker threads.
        spark = SparkSession.builder.getOrCreate()
        # The materialization renders blank lines before the model's source; drop them so that
        # line numbers in the traceback are the model file's own.
        lines = compiled_code.splitlines(keepends=True)
        while lines and not lines[0].strip():
            lines.pop(0)
        compiled_code = "".join(lines)
        linecache.cache[self.filename] = (len(compiled_code), None, lines, self.filename)
        try:
            code = compile(compiled_code, self.filename, "exec")
            exec(code, {"spark": spark, "__name__": f"dbt_python_model_{self.model_name}"})
        except Exception as exc:
            raise DbtRuntimeError(self._describe(exc)) from exc
        return None

    def _describe(self, exc: BaseException) -> str:
        frames = traceback.extract_tb(exc.__traceback__)
        # Start at the model's own code: drop this helper's frame and dbt's generated glue.
        frames = [f for f in frames if f.filename != __file__] or frames
        while len(frames) > 1 and frames[0].name == "<module>":
            frames.pop(0)
        body = "".join(traceback.format_list(frames))
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return (
            f"Python model '{self.model_name}' failed in {self.filename}:\n"
            f"Traceback (most recent call last):\n{body}{detail}"
        )
