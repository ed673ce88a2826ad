# SPDX-License-Identifier: Apache-2.0
"""The processes the benchmark starts: each one reaped with wait4 for its rusage, all stopped on the way out."""

import os
import signal
import subprocess
import threading
import time

from .common import BenchError, Interrupted

# Every Child ever started, so that an error or a signal anywhere still stops them all.
CHILDREN = []
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class LineWatcher:
    """Reads a child's pipe in a thread, keeping every line with the time it arrived."""

    def __init__(self, stream):
        self.lines = []
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream):
        for line in stream:
            with self.cond:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wait_for(self, pred, timeout, start=0):
        """(time, line) of the first line from index `start` satisfying pred, or None on timeout/EOF."""
        deadline = time.monotonic() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.lines):
                    if pred(self.lines[i][1]):
                        return self.lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    return None
                self.cond.wait(min(left, 0.5))

    def text(self):
        with self.cond:
            return "\n".join(line for _, line in self.lines)


class Child:
    """A process we started, reaped with wait4 so that its rusage (CPU, peak RSS) is ours to read."""

    def __init__(self, argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        """stdout/stderr: subprocess constants, or the path of a file to write."""
        self.argv = [str(a) for a in argv]
        files = []

        def sink(x):
            if isinstance(x, str):
                files.append(open(x, "w"))
                return files[-1]
            return x

        try:
            # A session of its own: a Ctrl-C at the terminal reaches only us, and we stop it in order.
            self.popen = subprocess.Popen(self.argv, stdin=stdin, stdout=sink(stdout), stderr=sink(stderr),
                                          text=True, errors="replace", start_new_session=True)
        except OSError as e:
            raise BenchError(f"cannot run {self.argv[0]}: {e}") from None
        finally:
            for f in files:
                f.close()
        self.started = time.monotonic()
        self.ended = None
        self.status = None
        self.rusage = None
        CHILDREN.append(self)

    @property
    def pid(self):
        return self.popen.pid

    def poll(self):
        if self.status is None:
            pid, status, rusage = os.wait4(self.popen.pid, os.WNOHANG)
            if pid:
                self.ended = time.monotonic()
                self.status = os.waitstatus_to_exitcode(status)
                self.rusage = rusage
                self.popen.returncode = self.status
        return self.status

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        return self.status

    def send(self, sig):
        if self.poll() is None:
            os.kill(self.popen.pid, sig)

    def stop(self, sig=signal.SIGINT, grace=60.0):
        """Asks it to stop (tlsprof, bpftrace and perf all finish their output on SIGINT), kills it if not."""
        self.send(sig)
        if self.wait(grace) is None:
            self.send(signal.SIGKILL)
            self.wait(10)
        return self.status

    def cpu_ms(self):
        return (self.rusage.ru_utime + self.rusage.ru_stime) * 1e3 if self.rusage else None

    def maxrss_mb(self):
        return self.rusage.ru_maxrss / 1024.0 if self.rusage else None


def stop_all_children():
    for child in reversed(CHILDREN):
        try:
            if child.poll() is None:
                child.stop(signal.SIGINT, grace=10)
        except (OSError, ChildProcessError):
            pass


def _on_signal(signum, _frame):
    raise Interrupted(signum)


def raise_on_stop_signals():
    """SIGINT, SIGTERM and SIGHUP unwind the stack as Interrupted, so every finally block stops what it started."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)


def ignore_stop_signals():
    """While we stop what we started, a second Ctrl-C must not leave the rest running."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def run_text(argv, timeout=60, env=None, cwd=None):
    """A short command to completion, its output as text."""
    try:
        return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError(f"{argv[0]}: {e}") from None


def first_line(argv):
    """The first line a command prints (stdout, then stderr), or 'unknown': for version strings."""
    try:
        out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=30)
        return (out.stdout + out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"
