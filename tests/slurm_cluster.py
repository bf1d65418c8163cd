"""A real Slurm on this host for the cluster tests (``tests/test_cluster.py``).

:class:`SlurmCluster` writes a ``slurm.conf`` for this host into a directory of its own
(free ports, its own state, spool, pid and log files; every daemon reached at 127.0.0.1),
starts ``munged`` with its own key, socket and pid file (``AuthInfo=socket=...``), then
``slurmctld`` and one or two ``slurmd``, waits for the nodes to be idle, and stops exactly
the processes it started, by pid. Jobs find it through ``SLURM_CONF`` (:meth:`SlurmCluster.env`),
as on a real cluster, where ``/etc/slurm/slurm.conf`` plays that part.

Slurm itself is installed by ``make slurm`` (``tools/install_slurm.sh``, root); where it is
missing, :func:`missing_slurm` says so and how to install it.
"""
import atexit
import os
import os.path as osp
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Dict, List, Optional

# the daemons and the clients the tests call
SLURM_PROGRAMS = ('munged', 'slurmctld', 'slurmd', 'srun', 'scontrol', 'sinfo', 'squeue',
                  'scancel')
# AuthInfo=cred_expire: a job step credential's lifetime, and how long a requeued job waits
# before it may start again (slurm.conf(5); default 120 s, below 5 s slurmctld logs
# "AuthInfo=cred_expire=N invalid" and keeps 120). 10 s: a requeued test job restarts soon,
# and a step launch still has 10 s to present its credential.
CRED_EXPIRE = 10
INSTALL_HINT = ('run `make slurm` as root (tools/install_slurm.sh: apt-get install slurm-wlm '
                'munge), then `make test` or `pytest tests/test_cluster.py`')


def program(name: str) -> Optional[str]:
    """The path of a Slurm or munge program: on PATH, or in the sbin folders, where Debian
    puts the daemons and which not every PATH has."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get('PATH', ''), '/usr/sbin',
                                                    '/sbin']))


def missing_slurm() -> str:
    """Why the cluster tests cannot run here ('' when they can: Slurm and munge are
    installed and this is root)."""
    missing = [p for p in SLURM_PROGRAMS if program(p) is None]
    if missing:
        return f'Slurm is not installed ({", ".join(missing)} not found): {INSTALL_HINT}'
    if os.geteuid() != 0:
        # slurmd starts each job step as the user who submitted it, which needs root
        return ('the test cluster runs slurmd and munged as root (slurmd starts job steps as '
                'their user): run the cluster tests as root, e.g. `sudo make test` or '
                '`sudo .venv/bin/python -m pytest tests/test_cluster.py`')
    return ''


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def node_names(nodes: int) -> List[str]:
    """Names for ``nodes`` (1 or 2) slurmd daemons on this host: its name, then
    ``localhost``.

    mmengine's slurm launcher makes the first node of a job its ``MASTER_ADDR``, so every
    node needs a name that resolves to this host: ``localhost`` does everywhere.
    """
    host = socket.gethostname().split('.')[0]
    if nodes == 1:
        return [host]
    if nodes != 2 or host == 'localhost':
        raise ValueError(f'{nodes} nodes on a host named {host!r}: this cluster makes at most '
                         "two, named after the host and 'localhost'")
    return [host, 'localhost']


class SlurmCluster:
    """munged + slurmctld + ``nodes`` slurmd on this host, each node with all its CPUs.

    Args:
        root (str, optional): an empty directory for the configuration, state and logs.
            Defaults to a new temporary directory, removed by :meth:`stop`.
        nodes (int): slurmd daemons, 1 or 2 (:func:`node_names`). Two on one host need a
            Slurm built with ``--enable-multiple-slurmd``, as Debian's is
            (``scontrol show config``: ``MULTIPLE_SLURMD = Yes``).
        partition (str): the one partition, holding every node.
    """

    def __init__(self, root: Optional[str] = None, nodes: int = 1,
                 partition: str = 'cpu') -> None:
        self._own_root = root is None
        self.root = root or tempfile.mkdtemp(prefix='mmevt-slurm-')
        # munged wants every directory above its socket searchable by all (its clients may
        # be other users): mkdtemp makes them 0700
        os.chmod(self.root, 0o711)
        self.partition = partition
        self.node_names = node_names(nodes)
        self.cpus = os.cpu_count() or 1
        self.conf = osp.join(self.root, 'slurm.conf')
        self.socket = osp.join(self.root, 'munge', 'munge.socket')
        self.procs: Dict[str, subprocess.Popen] = {}  # name -> the daemon we started
        self._stopped = False

    # ------------------------------------------------------------------ configuration
    def _write_files(self) -> None:
        for sub in ('munge', 'state', 'spool', 'run', 'log'):
            os.makedirs(osp.join(self.root, sub), mode=0o711, exist_ok=True)
        key = osp.join(self.root, 'munge', 'munge.key')
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, 'wb') as f:  # a key of its own: no other munged accepts our jobs
            f.write(os.urandom(1024))
        r = self.root
        ports = [free_port() for _ in self.node_names]
        lines = [
            '# written by tests/slurm_cluster.py: a throw-away cluster on this host',
            'ClusterName=mmevt-test',
            f'SlurmctldHost={self.node_names[0]}(127.0.0.1)',
            f'SlurmctldPort={free_port()}',
            f'SlurmdPort={ports[0]}',
            'SlurmUser=root', 'SlurmdUser=root',
            'AuthType=auth/munge', 'CredType=cred/munge',
            f'AuthInfo=socket={self.socket},cred_expire={CRED_EXPIRE}',
            f'StateSaveLocation={r}/state', f'SlurmdSpoolDir={r}/spool/%n',
            f'SlurmctldPidFile={r}/run/slurmctld.pid', f'SlurmdPidFile={r}/run/slurmd-%n.pid',
            f'SlurmctldLogFile={r}/log/slurmctld.log', f'SlurmdLogFile={r}/log/slurmd-%n.log',
            # no cgroups in a container: track job processes by their parent, bind nothing
            'ProctrackType=proctrack/linuxproc', 'TaskPlugin=task/none',
            'SelectType=select/cons_tres', 'SelectTypeParameters=CR_Core',
            'MpiDefault=none', 'SchedulerType=sched/backfill', 'ReturnToService=2',
            # a requeued job becomes eligible cred_expire s later; the main scheduling loop
            # (default every 60 s) and backfill (30 s) would start it up to a minute after
            'SchedulerParameters=sched_interval=2,bf_interval=1',
            'AccountingStorageType=accounting_storage/none',
            'JobAcctGatherType=jobacct_gather/none', 'JobCompType=jobcomp/none',
            'InactiveLimit=0', 'KillWait=5', 'SlurmdTimeout=60', 'SlurmctldTimeout=60',
        ]
        for name, port in zip(self.node_names, ports):
            hostname = f' NodeHostname={socket.gethostname()}' if len(ports) > 1 else ''
            lines.append(f'NodeName={name}{hostname} NodeAddr=127.0.0.1 Port={port} '
                         f'CPUs={self.cpus} State=UNKNOWN')
        lines.append(f'PartitionName={self.partition} Nodes=ALL Default=YES '
                     'MaxTime=INFINITE State=UP')
        with open(self.conf, 'w') as f:
            f.write('\n'.join(lines) + '\n')

    def env(self, **extra: str) -> Dict[str, str]:
        """``os.environ`` for a client or a job of this cluster (``SLURM_CONF``), plus
        ``extra``. Other ``SLURM_*`` variables are left out: inside another Slurm job (a
        developer's ``salloc``) ``srun`` would join that job's allocation instead."""
        env = {k: v for k, v in os.environ.items() if not k.startswith('SLURM_')}
        return dict(env, SLURM_CONF=self.conf, **extra)

    def run(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        """Run a Slurm client (``sinfo ...``) against this cluster; its stdout."""
        proc = subprocess.run([program(args[0]) or args[0], *args[1:]], env=self.env(),
                              timeout=timeout, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
        if check and proc.returncode != 0:
            raise RuntimeError(f'{" ".join(args)} exited {proc.returncode}: {proc.stdout}')
        return proc.stdout

    # ------------------------------------------------------------------ start / stop
    def _daemon(self, name: str, args: List[str]) -> None:
        """Start a daemon in the foreground (its pid is the Popen's, which we stop)."""
        out = open(osp.join(self.root, 'log', f'{name}.out'), 'w')
        self.procs[name] = subprocess.Popen([program(args[0]), *args[1:]], env=self.env(),
                                            stdout=out, stderr=subprocess.STDOUT,
                                            cwd=self.root)
        out.close()

    def _wait(self, what: str, ready, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f'the test cluster did not get {what} in {timeout:.0f} s '
                                   f'(exited: {dead or "none"}):\n{self.logs()}')
            time.sleep(0.25)

    def _nodes_idle(self) -> bool:
        out = self.run('sinfo', '-h', '-N', '-o', '%N %t', check=False)
        states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
        return all(states.get(n) == 'idle' for n in self.node_names)

    def start(self, timeout: float = 60) -> 'SlurmCluster':
        """Write the files, start the daemons, wait until every node is idle.

        Raises:
            RuntimeError: Slurm is missing, or a daemon exited or the nodes were not idle
                within ``timeout`` seconds (the message holds the daemons' logs); the
                daemons started so far are stopped first.
        """
        reason = missing_slurm()
        if reason:
            raise RuntimeError(reason)
        atexit.register(self.stop)  # also when a session ends without its finaliser
        try:
            self._write_files()
            m = osp.join(self.root, 'munge')
            self._daemon('munged', ['munged', '--foreground', f'--socket={self.socket}',
                                    f'--key-file={m}/munge.key', f'--pid-file={m}/munged.pid',
                                    f'--seed-file={m}/munged.seed',
                                    f'--log-file={self.root}/log/munged.log'])
            self._wait('munged', lambda: osp.exists(self.socket), timeout)
            self._daemon('slurmctld', ['slurmctld', '-D', '-f', self.conf])
            self._wait('slurmctld', lambda: 'UP' in self.run('scontrol', 'ping', check=False),
                       timeout)
            for name in self.node_names:
                self._daemon(f'slurmd-{name}', ['slurmd', '-D', '-f', self.conf, '-N', name])
            self._wait('every node idle', self._nodes_idle, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def logs(self, tail: int = 20) -> str:
        """The last ``tail`` lines of each daemon's log and output."""
        parts = []
        for name in sorted(os.listdir(osp.join(self.root, 'log'))):
            with open(osp.join(self.root, 'log', name), errors='replace') as f:
                lines = f.read().splitlines()[-tail:]
            parts.append(f'--- {name}\n' + '\n'.join(lines))
        return '\n'.join(parts)

    def leftovers(self) -> List[int]:
        """Processes other than the daemons that carry this cluster's ``SLURM_CONF``: job
        steps (slurmstepd inherits slurmd's environment) and their tasks."""
        mark = f'SLURM_CONF={self.conf}'.encode()
        daemons = {p.pid for p in self.procs.values()}
        found = []
        for pid in filter(str.isdigit, os.listdir('/proc')):
            try:
                with open(f'/proc/{pid}/environ', 'rb') as f:
                    env = f.read().split(b'\0')
            except OSError:  # gone, or not ours to read
                continue
            if mark in env and int(pid) not in daemons and int(pid) != os.getpid():
                found.append(int(pid))
        return found

    def stop(self) -> List[int]:
        """Cancel what is still queued, stop the daemons we started by pid (slurmd, then
        slurmctld, then munged), and kill any job process left (by pid).

        Returns:
            list: the pids of job processes that were still running and had to be killed
            (none when every job ended on its own). Idempotent.
        """
        if self._stopped:
            return []
        self._stopped = True
        atexit.unregister(self.stop)
        killed = []
        if 'slurmctld' in self.procs and self.procs['slurmctld'].poll() is None:
            self.run('scancel', '--partition', self.partition, check=False)
            deadline = time.monotonic() + 30
            while (self.run('squeue', '-h', check=False).strip()
                   and time.monotonic() < deadline):
                time.sleep(0.5)
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
        return killed
