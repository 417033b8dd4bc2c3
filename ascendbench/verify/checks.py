"""``python -m ascendbench.verify``: one PASS/WARN/FAIL line per host check, exit 1 if any fails."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from huggingface_hub import constants
from omegaconf import OmegaConf

from ascendbench.compat import installed_version
from ascendbench.config import load_option
from ascendbench.devices.envdirs import env_dir_status
from ascendbench.metrics.lpips_net import backbone_file, backbone_problem
from ascendbench.npu_wheels import advice, host_hint
from ascendbench.verify import versions

STATUSES = ("PASS", "WARN", "FAIL")
PROBE_MODULE = "ascendbench.verify.probe"  # run as `python -m` in a child process


@dataclass(frozen=True)
class Check:
    """One line of the report: ``status`` is PASS, WARN or FAIL."""

    name: str
    status: str
    detail: str


def probe_devices(timeout_s: float) -> dict[str, Any]:
    """Run :mod:`ascendbench.verify.probe` in a child process; its JSON, or ``{"error": ...}``."""
    try:
        done = subprocess.run([sys.executable, "-m", PROBE_MODULE], capture_output=True, text=True,
                              timeout=timeout_s, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return {"error": f"the device probe did not finish within {timeout_s:g} s (a hung driver "
                         "or runtime import?); rerun with --timeout <seconds> or check `npu-smi "
                         "info` / `nvidia-smi`"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"the device probe exited with code {done.returncode}: {tail[0][:300]}"}
    return json.loads(lines[-1])


def check_torch_npu(probe: dict[str, Any]) -> Check:
    """torch_npu installed, importable in the probe, and built for this torch."""
    npu, version = probe.get("npu", {}), installed_version("torch_npu")
    if version is None:
        return Check("torch_npu", "WARN", f"not installed: device=npu is unavailable "
                                          f"({host_hint()})")
    if not npu.get("importable"):
        return Check("torch_npu", "FAIL", f"{version} is installed but `import torch_npu` fails: "
                     f"{npu.get('error', 'unknown error')}. {host_hint()}")
    torch_version = installed_version("torch") or "?"
    npu_release = version.split("+")[0].rsplit(".post", 1)[0].split(".")[:2]
    if npu_release != torch_version.split("+")[0].split(".")[:2]:
        return Check("torch_npu", "FAIL", f"{version} does not match torch {torch_version}: "
                     "install the torch_npu release built for this torch (same major.minor)")
    return Check("torch_npu", "PASS", f"{version}, imports cleanly")


def check_torch_npu_wheel(probe: dict[str, Any]) -> Check:
    """The torch_npu wheel built for this torch and CANN (:mod:`ascendbench.npu_wheels`), named."""
    cann, _ = versions.cann_version(probe.get("npu", {}))
    status, text = advice(installed_version("torch"), cann, installed_version("torch_npu"))
    return Check("torch_npu wheel", status, text)


def check_cann(probe: dict[str, Any]) -> Check:
    """The CANN version from torch_npu, ``torch.version.cann`` or the toolkit's install files."""
    version, source = versions.cann_version(probe.get("npu", {}))
    if version is None:
        return Check("CANN", "WARN", "not found (torch_npu, torch.version.cann, ASCEND_HOME_PATH "
                                     "and /usr/local/Ascend were looked at); needed only for "
                                     "device=npu")
    return Check("CANN", "PASS", f"{version} (from {source})")


def check_ascend_dirs() -> Check:
    """The ASCEND_* directories: unset or a directory (missing: WARN; a file: FAIL)."""
    status = env_dir_status()
    detail = "; ".join(f"{k} {v}" for k, v in status.items())
    if any(v.startswith("not a directory") for v in status.values()):
        return Check("ascend dirs", "FAIL", f"{detail}: point each at a directory (or unset it), "
                     "else torch_npu fails at import with error 500001")
    if any(v.startswith("missing") for v in status.values()):
        return Check("ascend dirs", "WARN", f"{detail}: ascendbench creates them before importing "
                     "torch_npu (device=npu); other programs importing torch_npu will fail with "
                     "error 500001")
    return Check("ascend dirs", "PASS", detail)


def check_driver(timeout_s: float) -> Check:
    """The Ascend or NVIDIA driver version, from its version file or its SMI tool."""
    found = versions.driver_version(timeout_s)
    if not found:
        return Check("driver", "WARN", "no Ascend or NVIDIA driver found (version files, npu-smi, "
                                       "nvidia-smi); only the CPU can run jobs")
    return Check("driver", "PASS", "; ".join(f"{kind} {version} (from {source})"
                                             for kind, version, source in found))


def check_devices(probe: dict[str, Any], require: Sequence[str]) -> list[Check]:
    """One line per visible device, one per accelerator type that is not usable."""
    checks = [Check(f"device {d['id']}", "PASS", f"{d['name']}; {d['total_mb'] / 1024:.1f} GiB "
                    f"total, {d['free_mb'] / 1024:.1f} GiB free") for d in probe.get("devices", [])]
    for kind in ("cuda", "npu"):
        info = probe.get(kind, {})
        if info.get("count", 0) == 0:
            checks.append(Check(f"device {kind}", "FAIL" if kind in require else "WARN",
                                f"none usable: {info.get('why', 'not probed')}"))
    return checks


def check_attention(probe: dict[str, Any]) -> Check:
    """Which diffusers attention backends run here (a tiny call checked against math SDPA)."""
    results = [(f"{name}@{dev}", r) for name, per in probe.get("attention", {}).items()
               for dev, r in per.items()]
    if not results:
        return Check("attention", "FAIL", "no backend could be probed")
    usable = [where for where, r in results if r["ok"]]
    unusable = [f"{where}: {r['why']}" for where, r in results if not r["ok"]]
    native_broken = any(u.startswith("native@") for u in unusable)
    status = "FAIL" if native_broken or not usable else ("WARN" if unusable else "PASS")
    detail = "usable: " + (", ".join(usable) or "none")
    return Check("attention", status, detail + (" | not usable: " + "; ".join(unusable)
                                                if unusable else ""))


def check_lpips() -> Check:
    """The LPIPS weights the ``image`` metric would use, looked for exactly as the metric does."""
    image = OmegaConf.select(load_option("metric", "image"), "evaluators.image") or {}
    net, version = str(image.get("lpips_net", "alex")), str(image.get("lpips_version", "0.1"))
    problem = backbone_problem(net, version, verify_hash=bool(image.get("lpips_verify_hash", True)))
    if problem is None:
        return Check("lpips weights", "PASS",
                     f"{net} v{version} backbone present: {backbone_file(net)}")
    return Check("lpips weights", "WARN",
                 f"{problem} (the lpips metric is recorded as skipped until then)")


def check_hub(timeout_s: float) -> Check:
    """Offline mode, or a HEAD request to ``HF_ENDPOINT`` under a short timeout."""
    cache, endpoint = constants.HF_HUB_CACHE, constants.ENDPOINT
    if constants.HF_HUB_OFFLINE:
        return Check("hub", "PASS", f"offline mode (HF_HUB_OFFLINE=1): hub ids resolve from the "
                                    f"cache {cache} only")
    request = urllib.request.Request(endpoint, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return Check("hub", "PASS", f"{endpoint} reachable (HTTP {resp.status}); cache {cache}")
    except urllib.error.HTTPError as exc:  # the server answered: reachable
        return Check("hub", "PASS", f"{endpoint} reachable (HTTP {exc.code}); cache {cache}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return Check("hub", "WARN", f"{endpoint} not reachable within {timeout_s:g} s "
                     f"({getattr(exc, 'reason', exc)}): hub ids resolve from the cache {cache} "
                     "only. Set HF_ENDPOINT=<mirror url>, or HF_HUB_OFFLINE=1 to skip this lookup")


def _guarded(name: str, fn: Callable[[], Any]) -> list[Check]:
    try:
        result = fn()
    except Exception as exc:  # a check must never take the whole report down
        return [Check(name, "FAIL", f"the check itself failed: {type(exc).__name__}: {exc}")]
    return result if isinstance(result, list) else [result]


def run_checks(timeout_s: float = 120.0, hub_timeout_s: float = 5.0,
               require: Sequence[str] = ()) -> list[Check]:
    """All checks, in report order."""
    probe = probe_devices(timeout_s)
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("python", lambda: Check("python", *versions.python_status())),
        ("libraries", lambda: [Check(*row) for row in versions.library_statuses()]),
        ("device probe", lambda: [Check("device probe", "FAIL", probe["error"])]
         if "error" in probe else []),
        ("torch_npu", lambda: check_torch_npu(probe)),
        ("torch_npu wheel", lambda: check_torch_npu_wheel(probe)),
        ("CANN", lambda: check_cann(probe)), ("ascend dirs", check_ascend_dirs),
        ("driver", lambda: check_driver(min(timeout_s, 15.0))),
        ("devices", lambda: check_devices(probe, require)),
        ("attention", lambda: check_attention(probe)), ("lpips weights", check_lpips),
        ("hub", lambda: check_hub(hub_timeout_s)),
    ]
    return [check for name, step in steps for check in _guarded(name, step)]


def format_checks(checks: Sequence[Check]) -> str:
    """The report: one aligned line per check and a closing count."""
    width = max(len(c.name) for c in checks)
    lines = [f"{c.status:<4}  {c.name:<{width}}  {c.detail}" for c in checks]
    counts = {s: sum(c.status == s for c in checks) for s in STATUSES}
    lines.append(f"verify: {counts['PASS']} PASS, {counts['WARN']} WARN, {counts['FAIL']} FAIL")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report; return 1 when any check fails."""
    parser = argparse.ArgumentParser(prog="python -m ascendbench.verify",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--require", nargs="*", default=[], choices=["cuda", "npu"],
                        help="device types whose absence is a FAIL (default: a WARN)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds allowed for the device probe")
    parser.add_argument("--hub-timeout", type=float, default=5.0,
                        help="seconds allowed for the hub request")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    args = parser.parse_args(argv)
    checks = run_checks(args.timeout, args.hub_timeout, args.require)
    print(json.dumps([asdict(c) for c in checks], indent=2) if args.json else format_checks(checks))
    return 1 if any(c.status == "FAIL" for c in checks) else 0
