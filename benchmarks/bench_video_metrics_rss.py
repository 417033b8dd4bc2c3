"""Memory of the video metrics: peak extra RSS on a 161x3x480x704 float32 pair, as a ratio to the
pair.

The `video` metric option (regression metrics over the whole video + PSNR/SSIM/LPIPS per frame) runs
on a reference/device pair shaped like the Sulphur-2 seed's "quality" preset (161 frames of
480x704), built in place so that preparing it adds no peak of its own. The extra resident memory
above the pair is sampled every 5 ms (and cross-checked with ru_maxrss); goal: extra <= 1.5 x the
pair's size.

LPIPS needs torchvision's ImageNet AlexNet, which is not available offline: for this *memory*
measurement the backbone file is a seeded AlexNet state dict written to a temporary TORCH_HOME (same
architecture, same size; no LPIPS number from it is printed). ``--no-lpips`` leaves LPIPS out.

    python benchmarks/bench_video_metrics_rss.py [--frames 161] [--no-lpips]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import threading
import time

import psutil
import torch

GOAL = 1.5
MB = 1 << 20


def make_pair(frames: int, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[1, T, 3, H, W] float32 reference in [-1, 1] and a noisy device copy, built frame by frame in
    place."""
    generator = torch.Generator().manual_seed(0)
    reference = torch.empty(1, frames, 3, height, width)
    device = torch.empty_like(reference)
    for t in range(frames):
        reference[0, t].uniform_(-1.0, 1.0, generator=generator)
        device[0, t].copy_(reference[0, t]).add_(
            torch.randn(3, height, width, generator=generator), alpha=0.01
        )
    return reference, device


def seeded_alexnet_home() -> str:
    """A temporary TORCH_HOME holding a seeded AlexNet state dict under torchvision's file name."""
    import torchvision

    from ascendbench.metrics import lpips_net

    home = tempfile.mkdtemp(prefix="bench_torch_home_")
    os.environ["TORCH_HOME"] = home
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        state = torchvision.models.alexnet().state_dict()
    path = lpips_net.backbone_file("alex")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    del state
    return home


class PeakSampler(threading.Thread):
    """Samples this process's RSS every ``interval`` seconds and keeps the maximum."""

    def __init__(self, interval: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.process, self.interval, self.peak, self._stop_flag = (
            psutil.Process(),
            interval,
            0,
            threading.Event(),
        )

    def run(self) -> None:
        while not self._stop_flag.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(self.interval)

    def stop(self) -> int:
        self._stop_flag.set()
        self.join()
        return max(self.peak, self.process.memory_info().rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=161)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=704)
    parser.add_argument("--no-lpips", action="store_true")
    args = parser.parse_args()

    from ascendbench.metrics.evaluators import RegressionEvaluator
    from ascendbench.metrics.image import VideoEvaluator
    from ascendbench.metrics.suite import MetricSuite

    if not args.no_lpips:
        seeded_alexnet_home()
    suite = MetricSuite(
        "video",
        {
            "regression": RegressionEvaluator(),
            "video": VideoEvaluator(lpips=not args.no_lpips, lpips_verify_hash=False),
        },
    )
    reference, device = make_pair(args.frames, args.height, args.width)
    pair_mb = 2 * reference.numel() * reference.element_size() / MB
    rss_before = psutil.Process().memory_info().rss
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    sampler = PeakSampler()
    sampler.start()
    start = time.perf_counter()
    metrics = suite.evaluate({"video": reference}, {"video": device}, {}, atol=1e-5, rtol=1.3e-6)
    seconds = time.perf_counter() - start
    peak_sampled = sampler.stop()
    peak_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    extra_mb = max(peak_sampled - rss_before, peak_maxrss - max(maxrss_before, rss_before), 0) / MB
    ratio = extra_mb / pair_mb
    lpips = "skipped (--no-lpips)" if args.no_lpips else "seeded AlexNet backbone (memory only)"
    print(
        f"pair: 2 x [1, {args.frames}, 3, {args.height}, {args.width}] float32 = "
        f"{pair_mb:.0f} MiB; metrics: regression + video per frame (PSNR, SSIM, LPIPS {lpips}); "
        f"{seconds:.1f} s"
    )
    print(
        f"frames compared: {metrics['video_psnr_db_mean']['frames']}; "
        f"video_psnr_db_mean {metrics['video_psnr_db_mean']['value']:.2f} dB"
    )
    print(f"peak extra RSS: {extra_mb:.0f} MiB (sampled every 5 ms and from ru_maxrss)")
    verdict = "OK" if ratio <= GOAL else "ABOVE GOAL"
    print(f"ratio peak extra RSS / pair size: {ratio:.3f} (goal <= {GOAL}) -> {verdict}")


if __name__ == "__main__":
    main()
