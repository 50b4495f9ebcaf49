"""A Spark cluster on this machine, reached the way dbt Cloud reaches one: a standalone master, one
worker and a Spark Thrift Server with Delta Lake, every port on 127.0.0.1.

    python -m incremental_joins.cluster start     # prints the profile to use; returns when it answers
    python -m incremental_joins.cluster status
    python -m incremental_joins.cluster stop      # stops all three, executors included

Everything comes from the pyspark distribution (`bin/spark-class`, `bin/spark-submit` and the
`spark-hive-thriftserver` jar) and the Delta jars the embedded runtime caches. The cluster keeps its
warehouse, Derby metastore, logs and process ids under `$INCREMENTAL_JOINS_HOME/cluster`
(default `.spark/cluster`). Ports: `INCREMENTAL_JOINS_THRIFT_PORT` (default 10000) and
`INCREMENTAL_JOINS_MASTER_PORT` (default 7077); every other port is picked by the OS, on loopback.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.find_spark_home import _find_spark_home

from incremental_joins.runtime import RuntimePaths, RuntimeSetupError, check_java, extra_conf, session_conf

LOOPBACK = "127.0.0.1"
THRIFT_SERVER = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((LOOPBACK, port)) == 0


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a process from /proc, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[2])


def _alive(pid: int) -> bool:
    # A child of ours that exited but was not reaped is a zombie: gone for our purposes.
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


@dataclass
class Cluster:
    """Master + worker + Thrift Server; `start()` returns once the Thrift port answers."""

    home: Path
    thrift_port: int = 10000
    master_port: int = 7077
    worker_memory: str = field(default_factory=lambda: os.environ.get("INCREMENTAL_JOINS_WORKER_MEMORY", "6g"))
    executor_memory: str = field(default_factory=lambda: os.environ.get("INCREMENTAL_JOINS_EXECUTOR_MEMORY", "4g"))
    driver_memory: str = field(default_factory=lambda: os.environ.get("INCREMENTAL_JOINS_DRIVER_MEMORY", "2g"))
    _children: dict = field(default_factory=dict, init=False, repr=False)

    @classmethod
    def from_env(cls) -> "Cluster":
        home = Path(os.environ.get("INCREMENTAL_JOINS_HOME", ".spark")).resolve() / "cluster"
        return cls(home, int(os.environ.get("INCREMENTAL_JOINS_THRIFT_PORT", "10000")),
                   int(os.environ.get("INCREMENTAL_JOINS_MASTER_PORT", "7077")))

    @property
    def state_file(self) -> Path:
        return self.home / "processes.json"

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.master_port}"

    def processes(self) -> dict[str, int]:
        """The process ids this cluster started (master, worker, thriftserver) that are still alive."""
        if not self.state_file.exists():
            return {}
        return {name: pid for name, pid in json.loads(self.state_file.read_text()).items() if _alive(pid)}

    def running(self) -> bool:
        """All three processes of this cluster are alive and the Thrift server answers."""
        return set(self.processes()) == {"master", "worker", "thriftserver"} and _answers(self.thrift_port)

    def profile(self, schema: str = "analytics") -> str:
        return (f"type: spark\nmethod: thrift\nhost: {LOOPBACK}\nport: {self.thrift_port}\n"
                f"schema: {schema}\nthreads: 4\npoll_interval: 1\n")

    # --- start -----------------------------------------------------------------------------------
    def start(self, timeout: float = 300) -> None:
        if self.running():
            return
        if self.processes():
            self.stop()
        check_java()
        for port, what in ((self.master_port, "master"), (self.thrift_port, "Thrift server")):
            if _answers(port):
                raise RuntimeSetupError(
                    f"Port {port} on {LOOPBACK} is taken, so the cluster's {what} cannot listen there. "
                    "Stop what uses it, or choose another port with INCREMENTAL_JOINS_MASTER_PORT / "
                    "INCREMENTAL_JOINS_THRIFT_PORT.")
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        pids: dict[str, int] = {}
        try:
            pids["master"] = self._spawn("master", [
                "spark-class", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                "--port", str(self.master_port), "--webui-port", str(free_port())])
            self._wait(pids, lambda: _answers(self.master_port), "master", 60)
            pids["worker"] = self._spawn("worker", [
                "spark-class", "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                "--port", str(free_port()), "--webui-port", str(free_port()),
                "--cores", str(os.cpu_count() or 2), "--memory", self.worker_memory,
                "--work-dir", str(self.home / "work"), self.master_url])
            pids["thriftserver"] = self._spawn("thriftserver", self._thrift_server_command())
            self._wait(pids, lambda: _answers(self.thrift_port), "Thrift server", timeout)
        except BaseException:
            self._stop(pids)
            raise

    def _thrift_server_command(self) -> list[str]:
        paths = RuntimePaths(self.home)
        conf = session_conf(paths)
        # ANSI mode, the default of Spark 4, Databricks SQL and Databricks Runtime 17+, where the
        # embedded session keeps it off (Spark 3's, older runtimes'): the tests' two modes run the
        # package under both.
        conf["spark.sql.ansi.enabled"] = extra_conf().get("spark.sql.ansi.enabled", "true")
        conf.update({
            "spark.master": self.master_url,
            "spark.app.name": "incremental_joins thrift server",
            "spark.driver.memory": self.driver_memory,
            "spark.executor.memory": self.executor_memory,
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            # The executor runs next to the driver; its logs stay with the worker.
            "spark.executor.extraJavaOptions": conf["spark.driver.extraJavaOptions"],
        })
        # On the class path from the start, not added later by spark.jars: the Thrift server runs
        # statements in threads whose class loader does not see added jars (Delta's analyzer rules
        # then fail with ClassNotFoundException). Driver and executors share this machine's files.
        jars = conf.pop("spark.jars").replace(",", os.pathsep)
        conf["spark.driver.extraClassPath"] = conf["spark.executor.extraClassPath"] = jars
        command = ["spark-submit", "--class", THRIFT_SERVER]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        command += ["--hiveconf", f"hive.server2.thrift.bind.host={LOOPBACK}",
                    "--hiveconf", f"hive.server2.thrift.port={self.thrift_port}",
                    "spark-internal"]
        return command

    def _spawn(self, name: str, command: list[str]) -> int:
        spark_home = Path(_find_spark_home())
        env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": LOOPBACK,
               "SPARK_LOG_DIR": str(self.home / "logs"), "SPARK_WORKER_DIR": str(self.home / "work")}
        env.pop("PYSPARK_GATEWAY_PORT", None)
        env.pop("PYSPARK_GATEWAY_SECRET", None)
        log = open(self.home / "logs" / f"{name}.log", "ab")
        # Own session: `stop` signals the whole group (the worker's executors are in it).
        process = subprocess.Popen(["bash", str(spark_home / "bin" / command[0]), *command[1:]],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, cwd=self.home, start_new_session=True)
        log.close()
        self._children[process.pid] = process  # reaped in stop() when this object started it
        pids = {**self.processes(), name: process.pid}
        self.state_file.write_text(json.dumps(pids))
        return process.pid

    def _wait(self, pids: dict[str, int], ready, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [name for name, pid in pids.items() if not _alive(pid)]
            if dead or time.monotonic() > deadline:
                log = self.home / "logs" / f"{dead[0] if dead else list(pids)[-1]}.log"
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else ""
                reason = f"{', '.join(dead)} exited" if dead else f"not answering after {timeout:.0f} s"
                raise RuntimeSetupError(f"The cluster's {what} did not start ({reason}); last lines of {log}:\n{tail}")
            time.sleep(0.5)

    # --- stop ------------------------------------------------------------------------------------
    def stop(self, timeout: float = 60) -> list[str]:
        """Stop everything this cluster started (Thrift server first, then worker, then master);
        returns what could not be stopped (nothing, normally)."""
        return self._stop(self.processes(), timeout)

    def _stop(self, pids: dict[str, int], timeout: float = 60) -> list[str]:
        for name in ("thriftserver", "worker", "master"):
            pid = pids.get(name)
            if pid is None:
                continue
            for sig, wait in ((signal.SIGTERM, timeout / 2), (signal.SIGKILL, 10)):
                try:
                    os.killpg(pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and _group_alive(pid):
                    time.sleep(0.2)
                if not _group_alive(pid):
                    break
            child = self._children.pop(pid, None)
            if child is not None:
                child.poll()  # no zombie left behind by the process that started the cluster
        left = [name for name, pid in pids.items() if _group_alive(pid)]
        if self.state_file.exists() and not left:
            self.state_file.unlink()
        return left


def _group_pids(pgid: int) -> list[int]:
    """The running (not zombie) processes of a process group."""
    pids = (int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit())
    return [pid for pid in pids if (stat := _stat(pid)) and stat[0] != "Z" and stat[1] == pgid]


def listening(pgids: list[int]) -> set[str]:
    """`address:port` of every TCP socket the processes of these groups listen on (from /proc)."""
    inodes = set()
    for pid in (p for g in pgids for p in _group_pids(g)):
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(_address(fields[1]))
    return found


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        text = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # IPv6: four little-endian 32-bit words; a v4-mapped address is shown as IPv4
        address = ipaddress.IPv6Address(b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
        text = str(address.ipv4_mapped or address)
    return f"{text}:{int(port, 16)}"


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (the worker's executors included)."""
    return bool(_group_pids(pgid))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m incremental_joins.cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["start", "stop", "status"])
    args = parser.parse_args(argv)
    cluster = Cluster.from_env()
    try:
        if args.command == "start":
            cluster.start()
            print(f"cluster: master {cluster.master_url}, Thrift server {LOOPBACK}:{cluster.thrift_port} "
                  f"(logs in {cluster.home / 'logs'}). A dbt profile output for it:\n{cluster.profile()}")
        elif args.command == "stop":
            left = cluster.stop()
            if left:
                print(f"cluster: could not stop {', '.join(left)} (see {cluster.state_file})", file=sys.stderr)
                return 1
            print("cluster: stopped")
        else:
            running = cluster.processes()
            print(f"cluster: {', '.join(f'{n} (pid {p})' for n, p in running.items()) or 'not running'}")
            if running:
                print(f"listening on: {', '.join(sorted(listening(list(running.values()))))}")
    except RuntimeSetupError as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
