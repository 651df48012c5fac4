"""zflow.LocalCluster: a local cluster (broker, executors, scheduler on
127.0.0.1) run by the `zflow up` program, for tests and notebooks."""
import os
import re
import select
import shutil
import signal
import subprocess
import time

_LINE = re.compile(r"^zflow cluster listening on (\S+) ")


def find_zflow(zflow_bin=None):
    """The path of the `zflow` program: zflow_bin (the program or its
    directory), else $ZFLOW_BIN (likewise), else `zflow` on PATH.
    FileNotFoundError when none is there."""
    for cand, what in ((zflow_bin, "the zflow_bin argument"),
                       (os.environ.get("ZFLOW_BIN"), "$ZFLOW_BIN")):
        if not cand:
            continue
        path = os.path.join(cand, "zflow") if os.path.isdir(cand) else cand
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
        raise FileNotFoundError("%s names %s, which is not an executable zflow program"
                                % (what, cand))
    path = shutil.which("zflow")
    if path is None:
        raise FileNotFoundError("cannot find the zflow program: pass zflow_bin=, set $ZFLOW_BIN "
                                "or put it on PATH")
    return path


class LocalCluster:
    """Starts `zflow up` (a broker, one executor per device, a scheduler) on
    127.0.0.1 and stops it on close() or at the end of a with block.

        with zflow.LocalCluster(cpu=2) as cluster:
            with zflow.Session(cluster.target, "examples/mlp.pbtxt") as sess:
                ...

    cpu: CPU executors; devices: a device list instead ("cpu:2,gpu:1");
    port: the broker's port (0: a free one); zflow_bin: see find_zflow."""

    def __init__(self, cpu=1, devices=None, port=0, zflow_bin=None, start_timeout=60.0):
        self.zflow = find_zflow(zflow_bin)
        self.bin_dir = os.path.dirname(self.zflow)
        if devices is None:
            if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 1:
                raise ValueError("cpu must be a positive integer, not %r" % (cpu,))
            devices = "cpu:%d" % cpu
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError("port must be 0..65535, not %r" % (port,))
        self.devices = devices
        argv = [self.zflow, "up", "--devices", devices, "--port", str(port)]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                      start_new_session=True)
        try:
            self.target = self._read_target(start_timeout)
        except BaseException:
            self._kill()
            raise

    def _read_target(self, timeout):
        out = self._proc.stdout
        deadline = time.monotonic() + timeout
        buf = b""
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("zflow up did not start within %.0f s" % timeout)
            ready, _, _ = select.select([out], [], [], left)
            if not ready:
                continue
            chunk = os.read(out.fileno(), 4096)
            if not chunk:
                rc = self._proc.wait()
                raise RuntimeError("zflow up exited with status %d before starting%s"
                                   % (rc, ": " + buf.decode(errors="replace") if buf else ""))
            buf += chunk
        line = buf.split(b"\n", 1)[0].decode(errors="replace")
        m = _LINE.match(line)
        if not m:
            raise RuntimeError("zflow up printed %r, not its address" % line)
        return m.group(1)

    @property
    def pid(self):
        """The process id of `zflow up`."""
        return self._proc.pid

    def poll(self):
        """None while the cluster runs, else `zflow up`'s exit status."""
        return self._proc.poll()

    def close(self, timeout=15.0):
        """Stops every process (SIGTERM to `zflow up`, which stops its
        children); returns `zflow up`'s exit status."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill()
        if self._proc.stdout:
            self._proc.stdout.close()
        return self._proc.returncode

    def _kill(self):
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self._kill()
        except Exception:
            pass
