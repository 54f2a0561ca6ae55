"""Who advances a run in a bucket: a lease, not a lock file.

A lease is a create-only object ``lease/<epoch>.json`` naming its holder and when it
expires. The newest epoch rules: a machine takes the run by creating the next epoch,
which succeeds for one machine only; the holder renews by creating the next again
(create-only too: a renewal that finds it taken means another machine took the run),
and stops before its next billable call when it cannot. A machine killed mid-tick holds
nothing once its lease has expired; whoever comes next takes over, and looks on the
services before it buys (the run's mark on every batch), so it adopts what the dead one
bought. Releasing writes a next epoch that has expired already.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable

from ..errors import RunLockedError
from .objects import Objects

LEASE = 600.0  # seconds a lease lasts from its last renewal
RENEW = LEASE / 2  # renewed once this much of it has passed
MARGIN = 60.0  # never act on a lease this close to its end (the machines' clocks may differ)


def holder() -> str:
    """This process, as a lease names it (a host name and a process: no secret)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _gone(holder: str) -> bool:
    """Whether a lease's holder is a process of this host that no longer runs."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # there, another user's
        return False
    return False


class Lease:
    def __init__(
        self,
        objects: Objects,
        prefix: str,
        run: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.objects, self.prefix, self.run, self.clock = objects, prefix, run, clock
        self.me = holder()
        self.epoch = -1
        self.expires = 0.0

    def _key(self, epoch: int) -> str:
        return f"{self.prefix}/{epoch:012d}.json"

    def _newest(self) -> tuple[int, dict[str, object]]:
        keys = list(self.objects.names(self.prefix + "/"))
        if not keys:
            return -1, {}
        newest = keys[-1]
        data = self.objects.get(newest) or b"{}"
        epoch = int(newest.rsplit("/", 1)[-1].split(".")[0])
        return epoch, json.loads(data)

    def take(self) -> None:
        """The run is this process's until released, or refused in one line. A lease whose
        holder was a process of this host that is gone (killed) has lapsed already."""
        epoch, said = self._newest()
        now = self.clock()
        expires = float(str(said.get("expires", 0)))
        other = str(said.get("holder") or "")
        if other and other != self.me and expires > now and not _gone(other):
            until = time.strftime("%H:%M UTC", time.gmtime(expires))
            raise RunLockedError(
                f"run {self.run!r} is being advanced by another machine ({other},"
                f" its lease until {until} unless renewed); wait for it, or for the lease to"
                " lapse if that machine is gone"
            )
        self._write(epoch + 1, now + LEASE, "taken by another machine just now")

    def _write(self, epoch: int, expires: float, lost: str) -> None:
        body = json.dumps({"holder": self.me, "expires": expires}).encode()
        if not self.objects.create(self._key(epoch), body):
            raise RunLockedError(f"run {self.run!r}: its lease was {lost}; nothing more is done")
        self.epoch, self.expires = epoch, expires
        if epoch >= 2:  # the newest epoch rules: the old ones only lengthen every look
            self.objects.delete(self._key(epoch - 2))

    def check(self) -> None:
        """Before a billable call: still this process's (renewed when half gone), or the
        run is stopped here, nothing bought."""
        now = self.clock()
        if now >= self.expires - MARGIN:
            raise RunLockedError(
                f"run {self.run!r}: its lease ran out (the process was held up); nothing more"
                " is done: run again"
            )
        if now >= self.expires - LEASE + RENEW:
            self._write(self.epoch + 1, now + LEASE, "taken by another machine")

    def release(self) -> None:
        """Free the run for the next machine at once (an epoch that has expired)."""
        if self.epoch >= 0:
            self.objects.create(
                self._key(self.epoch + 1), json.dumps({"holder": self.me, "expires": 0}).encode()
            )
            self.epoch = -1
