"""The reference child builds objects only from the request its job sent over a pipe: a file planted
or swapped in the shared baseline cache (where the request once was written) is never read, so a
loader such as ``{_target_: torch.load, weights_only: false}`` written there by another user runs
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import torch
from hydra.utils import instantiate

from ascendbench.baseline.service import ReferenceQuery, get_or_compute
from ascendbench.tasks.inputs import describe

from helpers import TINY_RUN, build_tiny_flux2


class _Touch:
    """Unpickling this creates the file ``path`` (what a hostile pickle would do instead of
    something worse)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


def _evil(request_text: str, payload: Path) -> str:
    """The job's request with its loader swapped for ``torch.load`` of a pickle."""
    request = json.loads(request_text)
    request["config"]["model"]["loader"] = {"_target_": "torch.load", "f": str(payload),
                                            "weights_only": False}
    return json.dumps(request)


def _swap_requests(entry_root: Path, payload: Path, stop: threading.Event) -> None:
    """The attacker: rewrite every request file that appears under the cache with the hostile
    loader."""
    while not stop.is_set():
        for path in entry_root.glob("*/request-*.json"):
            try:
                text = path.read_text()
                if "torch.load" not in text:
                    planted = path.with_name(path.name + ".tmp")
                    planted.write_text(_evil(text, payload))
                    os.replace(planted, path)
            except (OSError, ValueError, KeyError):
                continue
        stop.wait(0.005)


def test_a_request_file_swapped_in_the_shared_cache_runs_nothing(compose_cfg, tmp_path):
    cache = tmp_path / "shared-cache"
    cfg = compose_cfg(["model=tiny_flux2_decoder", *TINY_RUN, f"baseline.cache_dir={cache}",
                       "baseline.process=child"])
    task = instantiate(cfg.model.task)
    inputs = task.make_inputs(cfg.preset, cfg.seed)
    weights = {"kind": "random-init", "init_seed": 42}
    query = ReferenceQuery(cfg, task, inputs, torch.float64, weights,
                           describe(inputs), build_tiny_flux2(), tmp_path / "job")
    marker, payload = tmp_path / "pickle-ran", tmp_path / "evil.pt"
    torch.save({"x": _Touch(marker)}, payload)
    entry = query.store.entry(query.key)
    entry.mkdir(parents=True)
    decoy = tmp_path / "decoy.json"
    decoy.write_text("{}")
    (entry / f"request-{os.getpid()}.json").symlink_to(decoy)  # where requests once went
    stop = threading.Event()
    attacker = threading.Thread(target=_swap_requests, args=(cache, payload, stop), daemon=True)
    attacker.start()
    try:
        info = get_or_compute(query)
    finally:
        stop.set()
        attacker.join()
    assert not marker.exists(), "the hostile loader of a swapped request file ran in the child"
    assert info.info["computed"] is True and (tmp_path / "job" / "baseline_child.log").is_file()
    assert decoy.read_text() == "{}", "nothing is written through a link planted in the cache"


def test_the_reference_child_refuses_a_request_file_argument(tmp_path):
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"config": {}}))
    done = subprocess.run([sys.executable, "-m", "ascendbench.baseline", str(request)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "a request file is not accepted" in done.stderr
