"""Cards claimed by this process: a ``flock(2)`` per card, held until exit (``CardPool``)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Sequence

from filelock import FileLock, Timeout

from ascendbench.errors import NoFreeCardError

log = logging.getLogger(__name__)

# The cards this process holds: {"card": "2" or "0,1", "lock": [FileLock...], "lock_dir": str}.
_CLAIM: dict[str, Any] = {}
_REFUSED: dict[str, NoFreeCardError] = {}  # this worker's current job found no free card


def claim_card(cards: Sequence[str], lock_dir: Path, wait_s: float = 60.0, count: int = 1,
               lock_name: str = "card-{card}.lock") -> str:
    """Claim ``count`` free cards for good (a runtime cannot switch); else NoFreeCardError."""
    if _CLAIM:
        if _CLAIM["lock_dir"] != str(lock_dir):
            log.warning("this process already holds card %s (pool %s); keeping it", _CLAIM["card"],
                        _CLAIM["lock_dir"])
        return _CLAIM["card"]
    lock_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_s
    held: dict[str, FileLock] = {}
    while len(held) < count:
        for card in (c for c in cards if c not in held and len(held) < count):
            lock = FileLock(str(lock_dir / lock_name.format(card=card)))
            try:
                lock.acquire(timeout=0)
            except (Timeout, PermissionError):  # held, or another user's file: busy either way
                continue
            held[card] = lock
        if len(held) < count and time.monotonic() > deadline:
            for lock in held.values():
                lock.release(force=True)
            wanted = "free card" if count == 1 else f"{count} free cards"
            raise NoFreeCardError(
                f"no {wanted} in the pool {list(cards)} after {wait_s:g} s (locks in {lock_dir}): "
                "more jobs run at once than there are cards. Set hydra.launcher.n_jobs to at most "
                "the number of cards (divided by device.world_size), or list more in "
                "hydra.callbacks.cards.cards, e.g. `hydra.callbacks.cards.cards=[0,1,2,3]`.")
        if len(held) < count:
            time.sleep(0.2)
    _CLAIM.update(card=",".join(held), lock=list(held.values()), lock_dir=str(lock_dir))
    log.debug("process %d holds card(s) %s", os.getpid(), _CLAIM["card"])
    return _CLAIM["card"]


def card_refusal() -> NoFreeCardError | None:
    """Why the pool gave this job no card, or None (Hydra only warns about callback errors)."""
    return _REFUSED.get("error")



def refuse(error: NoFreeCardError) -> None:
    """Remember that this worker's current job found no free card."""
    _REFUSED["error"] = error


def clear_refusal() -> None:
    """A new job of this worker: no refusal yet."""
    _REFUSED.clear()
