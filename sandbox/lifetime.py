"""Processes that end with their parent, and a parent that reaps what it adopts.

Every process a validator or miner starts must end when the neuron does, however it ends
(``kill -9`` included, when no cleanup code runs), and nothing it leaves may stay a zombie.
Three tools, one per way a process comes to be:

- :func:`die_with_parent`, for a child made by ``fork`` (a miner's planning process; through
  :func:`dies_with_this_process`, a ``subprocess`` child such as the localnet's neurons): the
  kernel sends it SIGKILL when its parent dies (``PR_SET_PDEATHSIG``). The kernel ties the
  signal to the parent *thread* that forked it, so fork only from a thread that lives as
  long as the child should (the main thread, or a pool's long-lived worker).
- :func:`exit_with_parent`, for a child started by ``multiprocessing`` with the ``spawn``
  method (tool processes, uvicorn's workers): it waits on the pipe multiprocessing keeps to
  its parent (``parent_process().sentinel``), which only the parent holds open, and exits
  when it closes. Its parent may have started it from any thread, even one that ends soon.
- :func:`reap_adopted`, for the neuron itself: it becomes the subreaper of everything it
  starts (``PR_SET_CHILD_SUBREAPER``), so a process orphaned below it comes back to it
  rather than to the machine's init or a supervisor, and a thread reaps those adoptees.
  bubblewrap orphans one on every run: its outer process exits as soon as its namespace's
  init reports the program's exit status, before that init has exited (containers/
  bubblewrap#697), and a neuron that is PID 1 in a container without an init adopts it
  anyway. Only adoptees are reaped, never a child of the neuron's own, which some other
  code waits for: see :func:`_adopted`.

multiprocessing's resource tracker needs none of these: it exits when the last holder of
its pipe (the neuron and the spawned children it passed the pipe to) is gone.

Linux only (``prctl``); elsewhere :func:`die_with_parent` falls back to watching the parent
id once a second and :func:`reap_adopted` does nothing.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
WATCH_S = 1.0
"""How often a child without ``prctl`` checks that its parent lives."""
REAP_S = 0.5
"""How often the neuron collects the zombies it adopted: an adoptee stays a zombie at most this long."""


def die_with_parent(parent: int) -> None:
    """Call first thing in a child made by ``fork``: SIGKILL when ``parent`` (the pid that
    forked it) dies, even when it dies before this call returns."""
    if not _prctl(PR_SET_PDEATHSIG, signal.SIGKILL):
        threading.Thread(target=_watch_parent_id, args=(parent,), name="dagnet-parent-watch", daemon=True).start()
    if os.getppid() != parent:  # it died before the signal was armed
        os._exit(1)


def dies_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen` (a fork, then ``exec``): the child gets
    SIGKILL when this process dies. Call ``Popen`` from a thread that lives as long as the
    child, such as the main thread."""
    _libc()  # resolved here: the fork only calls it
    return functools.partial(die_with_parent, os.getpid())


def exit_with_parent() -> None:
    """Call in a child started by multiprocessing's ``spawn`` (an ``initializer``, or first
    thing in its target): the process exits when its parent has. Does nothing in a process
    multiprocessing did not start."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_after, args=(parent,), name="dagnet-parent-watch", daemon=True).start()


def reap_adopted() -> bool:
    """Make this process the subreaper of its descendants and collect the zombies it adopts,
    from a daemon thread, every :data:`REAP_S`, and once more at exit. Call it before the
    process starts anything. Idempotent; False where the kernel gives no subreaper (then
    orphans go to init, as before)."""
    with _REAPER_LOCK:
        if os.getpid() in _REAPING:  # not a fork's inherited memory: fork clears the subreaper
            return True
        if not _prctl(PR_SET_CHILD_SUBREAPER, 1):
            return False
        _REAPING.append(os.getpid())
        threading.Thread(target=_reap_forever, name="dagnet-reaper", daemon=True).start()
        atexit.register(reap_once)  # what came back since the thread's last turn
        return True


def reap_once() -> list[int]:
    """Collect every zombie this process has adopted now; the pids collected."""
    own_session = os.getsid(0)
    reaped = []
    for pid, session in _zombie_children():
        if _adopted(pid, session, own_session):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped.append(pid)
            except ChildProcessError:
                pass
    return reaped


def _adopted(pid: int, session: int, own_session: int) -> bool:
    """Whether a child of ours came to us as an orphan rather than by our own fork.

    A child we forked starts in our session and can leave it only by ``setsid``, which makes
    it the leader of a new one: its session is ours or its own pid. A child in a third
    session was made by someone else (bubblewrap's namespace init is in the session of the
    outer bwrap, its parent). Orphans that are session leaders themselves are not told
    apart from our own children and are left to whoever waits for them."""
    return session not in (own_session, pid)


def _zombie_children() -> list[tuple[int, int]]:
    """``(pid, session)`` of this process's children that have exited and wait to be reaped."""
    found = []
    for task in _listdir(f"/proc/{os.getpid()}/task"):
        for child in _read(f"/proc/{os.getpid()}/task/{task}/children").split():
            stat = _read(f"/proc/{child}/stat")
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 3 and fields[0] == "Z":
                found.append((int(child), int(fields[3])))
    return found


_REAPER_LOCK = threading.Lock()
_REAPING: list[int] = []


def _reap_forever() -> None:
    while True:
        reap_once()
        time.sleep(REAP_S)


def _exit_after(parent: multiprocessing.process.BaseProcess) -> None:
    parent.join()  # returns once the parent's end of the pipe is closed: it has exited
    os._exit(1)


def _watch_parent_id(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_S)
    os._exit(1)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)  # the process's own symbols, libc's among them
    except OSError:
        return None


def _prctl(option: int, value: int) -> bool:
    libc = _libc()
    prctl = getattr(libc, "prctl", None)
    return prctl is not None and prctl(option, value, 0, 0, 0) == 0


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""
