"""Imported by every interpreter inside a bubblewrap sandbox (as ``sitecustomize``), before
the program: what the program reads of the wall clock and the random module is the same
on every run.

Staged read-only into the site-packages directories the sandbox hides (``sandbox/bwrap.py``),
standard library only. The wall clock reads :data:`EPOCH` and stands still: ``time.time``,
``time.time_ns``, ``time.clock_gettime[_ns](CLOCK_REALTIME)``, ``time.localtime``/``gmtime``/
``ctime``/``asctime``/``strftime`` without a time, ``datetime.datetime.now``/``utcnow``/
``today`` and ``datetime.date.today``. ``random`` starts from a fixed seed. Durations
(``time.monotonic``, ``perf_counter``, ``process_time``) stay real: every timeout a program
sets (``asyncio.sleep``, ``subprocess`` waits) counts on them. What is not covered is listed
in docs/sandbox.md.
"""

import datetime as _datetime
import random as _random
import time as _time

EPOCH = 1_700_000_000
"""2023-11-14 22:13:20 UTC: the one instant a sandboxed program sees."""
SEED = 0
_REALTIME = getattr(_time, "CLOCK_REALTIME", None)


def _fix_time():
    clock_gettime, clock_gettime_ns = _time.clock_gettime, _time.clock_gettime_ns
    now = float(EPOCH)

    def at(convert):
        return lambda *args: convert(now if not args or args[0] is None else args[0])

    def realtime(read, fixed):
        return lambda clock: fixed if clock == _REALTIME else read(clock)

    _time.time = lambda: now
    _time.time_ns = lambda: EPOCH * 10**9
    _time.clock_gettime = realtime(clock_gettime, now)
    _time.clock_gettime_ns = realtime(clock_gettime_ns, EPOCH * 10**9)
    _time.localtime, _time.gmtime, _time.ctime = at(_time.localtime), at(_time.gmtime), at(_time.ctime)
    asctime, strftime = _time.asctime, _time.strftime
    _time.asctime = lambda *args: asctime(*(args or [_time.localtime()]))
    _time.strftime = lambda fmt, *args: strftime(fmt, *(args or [_time.localtime()]))


class _Date(_datetime.date):
    def __repr__(self):
        return "datetime." + super().__repr__()

    @classmethod
    def today(cls):
        return cls.fromtimestamp(EPOCH)


class _DateTime(_datetime.datetime):
    def __repr__(self):
        return "datetime." + super().__repr__()

    @classmethod
    def now(cls, tz=None):
        return cls.fromtimestamp(EPOCH, tz)

    @classmethod
    def utcnow(cls):
        return cls.now(_datetime.UTC).replace(tzinfo=None)

    @classmethod
    def today(cls):
        return cls.now()


for _fixed, _name in ((_Date, "date"), (_DateTime, "datetime")):
    _fixed.__name__ = _fixed.__qualname__ = _name  # reprs and pickles name the usual class
    _fixed.__module__ = "datetime"
    setattr(_datetime, _name, _fixed)
_fix_time()
_random.seed(SEED)
