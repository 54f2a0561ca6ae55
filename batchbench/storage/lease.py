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

import hashlib
import json
import os
import re
import socket
import time
import uuid
from collections.abc import Callable

from ..errors import RunLockedError
from .objects import Objects

LEASE = 600.0  # seconds a lease lasts from its last renewal
RENEW = LEASE / 2  # renewed once this much of it has passed
MARGIN = 60.0  # never act on a lease this close to its end (a call in flight, clocks' rates)
_EPOCH = re.compile(r"/(\d{12})\.json$")


def _space() -> str:
    """Which machine and which process table this is: the boot's id and the PID namespace.
    Two containers may share a host name and not each other's process ids; a holder is
    judged gone by its process id only where both are this process's own (else never:
    its lease runs out on the store's clock)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return hashlib.sha256(f"{boot} {namespace}".encode()).hexdigest()[:12]


def this_machine() -> str:
    """This machine (its host name, boot and PID namespace): one clock for all its
    processes."""
    return f"{socket.gethostname()}:{_space()}"


def holder() -> str:
    """This process, as a lease names it (a host name, a process and where its process id
    means something: no secret)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}:{_space()}"


def _gone(holder: str) -> bool:
    """Whether a lease's holder is a process of this machine and PID namespace that no
    longer runs."""
    host, pid, _, space = (holder.split(":") + ["", "", "", ""])[:4]
    if host != socket.gethostname() or not pid.isdigit() or not space or space != _space():
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

    def _newest(self) -> tuple[int, dict[str, object], float]:
        """The newest epoch, what it says, and when the store wrote it (its clock)."""
        epochs = [
            (int(found.group(1)), key, written)
            for key, written in self.objects.listing(self.prefix + "/")
            if (found := _EPOCH.search(key))
        ]
        if not epochs:
            return -1, {}, 0.0
        epoch, key, written = max(epochs)
        data = self.objects.get(key) or b"{}"
        return epoch, json.loads(data), written

    def take(self) -> None:
        """The run is this process's until released, or refused in one line. Whether the
        last holder's lease still runs is judged on the store's clock — how long ago the
        store wrote it — never on this machine's, which may be minutes off; a holder is
        alive until then, unless it was a process of this machine and PID namespace that
        is gone (killed)."""
        epoch, said, written = self._newest()
        other = str(said.get("holder") or "")
        released = float(str(said.get("expires", 0))) == 0
        if other and other != self.me and not released and not _gone(other):
            probe = f"{self.prefix}/clock-{uuid.uuid4().hex[:12]}"
            try:
                age = self.objects.now(probe) - written
            finally:
                self.objects.delete(probe)
            lasts = float(str(said.get("lasts", LEASE))) + MARGIN
            if age < lasts:
                raise RunLockedError(
                    f"run {self.run!r} is being advanced by another machine ({other}, its"
                    f" lease renewed {max(age, 0):.0f} s ago by the store's clock, lapsing in"
                    f" {lasts - age:.0f} s unless renewed); wait for it, or for the lease to"
                    " lapse if that machine is gone"
                )
        self._write(epoch + 1, self.clock() + LEASE, "taken by another machine just now")

    def _write(self, epoch: int, expires: float, lost: str) -> None:
        body = json.dumps({"holder": self.me, "expires": expires, "lasts": LEASE}).encode()
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

    def withdraw(self) -> None:
        """The lease taken in a place the run has left: its object deleted, nothing
        written there (the place holds the move's note alone)."""
        if self.epoch >= 0:
            self.objects.delete(self._key(self.epoch))
            self.epoch = -1

    def release(self) -> None:
        """Free the run for the next machine at once (an epoch that has expired)."""
        if self.epoch >= 0:
            self.objects.create(
                self._key(self.epoch + 1), json.dumps({"holder": self.me, "expires": 0}).encode()
            )
            self.epoch = -1
