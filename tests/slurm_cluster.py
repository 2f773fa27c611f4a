"""A real one-node SLURM cluster for the tests: Debian's munge, slurmctld and slurmd, started in a
folder of their own (config, state, logs, sockets, ports) and stopped after.

Each pytest worker gets its own cluster (its own ports, node name and munge socket), so the
workers never share a queue. The client commands find it through SLURM_CONF, which `env()`
sets; a job inherits its submitter's environment, so the jobs find it too.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol")
INSTALL_HINT = ("install Debian's slurm-wlm and munge (as root: apt-get install slurm-wlm munge; .ci/run does it "
                "while it has the network)")


def missing_programs() -> list[str]:
    """The SLURM and munge programs this machine lacks (where Debian puts the daemons too)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [p for p in DAEMONS if shutil.which(p, path=path) is None]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _memory_mb() -> int:
    pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    return int(pages * size / 2**20 * 0.8)


@dataclass
class Cluster:
    root: Path
    node: str
    cpus: int
    gpus: int = 0
    """Count-only GPU resources on the node (no devices): what a GPU cluster's sinfo shows."""

    sockets: Path = Path()
    """A short folder for slurmd's spool and munge's socket: a Unix socket path may not pass 108
    bytes, and pytest's temporary folders under xdist come close (set by `start`)."""

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment whose SLURM commands (and jobs) use this cluster."""
        base = dict(os.environ if base is None else base)
        return {**base, "SLURM_CONF": str(self.conf), "PATH": base.get("PATH", "") + ":/usr/sbin:/sbin"}

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), env=self.env(), capture_output=True, text=True, timeout=60, check=check)

    def start(self) -> "Cluster":
        for part in ("state", "log"):
            (self.root / part).mkdir(parents=True, exist_ok=True)
        self.sockets = Path(tempfile.mkdtemp(prefix="tsl-", dir="/tmp"))
        self._write_conf()
        sbin = "/usr/sbin"
        subprocess.run([f"{sbin}/munged", "--force", f"--socket={self.sockets / 'munge.socket'}",
                        f"--pid-file={self.root / 'munged.pid'}", f"--log-file={self.root / 'log' / 'munged.log'}",
                        f"--seed-file={self.root / 'munge.seed'}"], check=True, timeout=30)
        subprocess.run([f"{sbin}/slurmctld", "-c", "-f", str(self.conf)], env=self.env(), check=True, timeout=60)
        subprocess.run([f"{sbin}/slurmd", "-c", "-N", self.node, "-f", str(self.conf)], env=self.env(), check=True,
                       timeout=60)
        self._wait_idle()
        return self

    def stop(self) -> None:
        """Cancel every job and stop the daemons (by their pid files)."""
        self.run("scancel", "--full", "--user", "root", check=False)
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = self.root / f"{name}.pid"
            if pid_file.is_file():
                try:
                    os.kill(int(pid_file.read_text().split()[0]), 15)
                except (ProcessLookupError, ValueError):
                    pass
        if self.sockets != Path():
            shutil.rmtree(self.sockets, ignore_errors=True)

    def jobs(self) -> list[str]:
        """Ids of the jobs in the queue (pending or running)."""
        return self.run("squeue", "-h", "-o", "%i").stdout.split()

    def _wait_idle(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = self.run("sinfo", "-h", "-N", "-o", "%t", check=False).stdout.strip()
            if state in ("idle", "mix", "alloc"):
                return
            time.sleep(0.5)
        logs = "\n".join((self.root / "log" / f).read_text()[-2000:] for f in ("slurmctld.log", "slurmd.log")
                         if (self.root / "log" / f).is_file())
        raise RuntimeError(f"the local SLURM node {self.node} never came up (state {state!r}):\n{logs}")

    def _write_conf(self) -> None:
        root = self.root
        if self.gpus:
            # Count-only GPUs: tty devices stand in for device files, which slurmd insists on for gpu.
            (root / "gres.conf").write_text(f"NodeName={self.node} Name=gpu File=/dev/tty[0-{self.gpus - 1}]\n")
        self.conf.write_text("\n".join([
            "ClusterName=toolsweep", "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.sockets / 'munge.socket'}",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={root / 'state'}", f"SlurmdSpoolDir={self.sockets}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}", f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill", "ReturnToService=2",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "JobRequeue=1", "KillWait=5", "SlurmctldTimeout=30", "SlurmdTimeout=30", "MinJobAge=600",
            *([f"GresTypes=gpu"] if self.gpus else []),
            f"NodeName={self.node} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname()} CPUs={self.cpus} "
            f"RealMemory={_memory_mb()} State=UNKNOWN" + (f" Gres=gpu:{self.gpus}" if self.gpus else ""),
            f"PartitionName=local Nodes={self.node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4",
            "",
        ]))
