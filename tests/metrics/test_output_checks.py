"""Reference-free output checks: planted broken images and videos fail with the check named; the
outputs of a stand-in trained to reproduce a structured clip pass; random-init outputs, and outputs
of a task whose input is not natural for the checks (decoded random latents), are reported, not
judged; NaN/Inf are judged everywhere."""

from __future__ import annotations

import math

import pytest
import torch

from ascendbench.metrics.output_checks import (
    NOT_JUDGED,
    NOT_NATURAL,
    check_output,
    output_checks,
    spectral_exponent,
)
from ascendbench.tasks.vae_decode import VaeDecodeTask, VideoDecodeTask

T, H, W = 9, 32, 32


class NaturalVideo(VideoDecodeTask):
    """A decode task declaring natural outputs (as text-to-video and tokenizer tasks do)."""

    natural_outputs = True


class NaturalImage(VaeDecodeTask):
    """An image task declaring natural outputs."""

    natural_outputs = True


def structured_clip() -> torch.Tensor:
    """A ``[1, 3, T, H, W]`` clip in [-1, 1]: a bright blob moving right over a colour gradient."""
    t = torch.arange(T, dtype=torch.float32).view(T, 1, 1)
    y = torch.arange(H, dtype=torch.float32).view(1, H, 1)
    x = torch.arange(W, dtype=torch.float32).view(1, 1, W)
    blob = torch.exp(-((x - 8 - 2 * t) ** 2 + (y - 16) ** 2) / 30.0)
    channels = [blob * 1.2 - 0.6 + 0.3 * torch.sin(x / 6 + y / 9 + k) for k in range(3)]
    return torch.stack(channels).unsqueeze(0).clamp(-1, 1)


class FourierStandIn(torch.nn.Module):
    """A coordinate network: (t, y, x) -> RGB through a fixed Fourier embedding and an MLP."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        grid = torch.stack(torch.meshgrid(torch.linspace(-1, 1, T), torch.linspace(-1, 1, H),
                                          torch.linspace(-1, 1, W), indexing="ij"), dim=-1)
        phase = grid @ (torch.randn(3, 16, generator=generator) * 3.0)
        self.register_buffer("features", torch.cat([phase.sin(), phase.cos()], dim=-1))
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.SiLU(),
                                       torch.nn.Linear(32, 3))

    def forward(self) -> torch.Tensor:
        rgb = torch.tanh(self.net(self.features))  # [T, H, W, 3]
        return rgb.permute(3, 0, 1, 2).unsqueeze(0)


def fitted_stand_in(steps: int = 200) -> FourierStandIn:
    """The stand-in fitted with Adam for ``steps`` steps to reproduce :func:`structured_clip`."""
    model, target = FourierStandIn(0), structured_clip()
    optimiser = torch.optim.Adam(model.parameters(), lr=2e-2)
    for _ in range(steps):
        optimiser.zero_grad()
        loss = torch.nn.functional.mse_loss(model(), target)
        loss.backward()
        optimiser.step()
    return model


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(1)


def _flicker(clip: torch.Tensor) -> torch.Tensor:
    broken = clip.clone()
    broken[:, :, 1::2] = -broken[:, :, 1::2]  # every other frame a negative: frames alternate
    return broken


def _rand(clip: torch.Tensor) -> torch.Tensor:
    return torch.rand(clip.shape, generator=_generator())


BROWN = torch.tensor([0.2, -0.1, -0.5]).view(1, 3, 1, 1, 1)
PLANTED_VIDEOS = {
    "constant": (lambda c: torch.full_like(c, 0.1), "output_flat_frames"),
    "black": (lambda c: -1 + 0.004 * _rand(c), "output_black_white_frames"),
    "white": (lambda c: torch.ones_like(c), "output_black_white_frames"),
    "noise": (lambda c: _rand(c) * 2 - 1, "output_spectral_exponent"),
    "brown_noise": (lambda c: BROWN + 0.2 * _rand(c), "output_spectral_exponent"),
    "frozen": (lambda c: c[:, :, :1].repeat(1, 1, T, 1, 1), "output_frozen_pairs"),
    "flicker": (_flicker, "output_flicker"),
}


@pytest.fixture(scope="module")
def trained() -> torch.Tensor:
    return fitted_stand_in()().detach()


@pytest.mark.parametrize("fault", sorted(PLANTED_VIDEOS))
def test_a_planted_broken_video_fails_the_check_named(fault: str) -> None:
    make, check = PLANTED_VIDEOS[fault]
    entries = check_output(make(structured_clip()), (-1.0, 1.0), "BCTHW")
    assert entries[check]["verdict"] == "FAIL", (check, entries[check])
    assert entries[check]["source"]


@pytest.mark.parametrize("fault", ["constant", "black", "white", "noise", "brown_noise"])
def test_a_planted_broken_image_fails_the_check_named(fault: str) -> None:
    make, check = PLANTED_VIDEOS[fault]
    images = make(structured_clip())[0].transpose(0, 1)  # the clip's frames as an image batch
    entries = check_output(images, (-1.0, 1.0), "BCTHW")
    assert entries[check]["verdict"] == "FAIL", (check, entries[check])
    # images: no time axis
    assert "output_flicker" not in entries and "output_frozen_pairs" not in entries


def test_the_trained_stand_in_passes_every_check(trained: torch.Tensor) -> None:
    assert torch.nn.functional.mse_loss(trained, structured_clip()) < 0.01  # it did learn the clip
    video = check_output(trained, (-1.0, 1.0), "BCTHW")
    images = check_output(trained[0].transpose(0, 1), (-1.0, 1.0), "BCTHW")
    assert {name: e["verdict"] for name, e in video.items()} == dict.fromkeys(video, "PASS")
    assert {name: e["verdict"] for name, e in images.items()} == dict.fromkeys(images, "PASS")
    assert len(video) == 5 and len(images) == 3


def test_random_init_outputs_are_reported_not_judged() -> None:
    untrained = FourierStandIn(3)().detach()
    task = NaturalVideo(latent_channels=4, spatial_compression=8, temporal_compression=8)
    entries = output_checks({"video": untrained + 3}, task, {"kind": "random-init"})
    pictures = {"output_flat_frames", "output_black_white_frames", "output_spectral_exponent",
                "output_frozen_pairs", "output_flicker"}
    assert set(entries) == {"output_nonfinite", "output_out_of_range_ratio", *pictures}
    assert all(e["verdict"] is None and e["not_judged"] == NOT_JUDGED
               and e["would_be"] in ("PASS", "FAIL", "WARN")
               for n, e in entries.items() if n != "output_nonfinite" and "skipped" not in e)
    assert entries["output_out_of_range_ratio"]["would_be"] == "FAIL", (
        "shifted out of range: reported")
    nonfinite = entries["output_nonfinite"]
    assert nonfinite["verdict"] == "PASS", "NaN/Inf are judged whatever the weights"
    judged = output_checks({"video": untrained + 3}, task, {"kind": "loaded"})
    assert all(e["verdict"] in ("PASS", "WARN", "FAIL") for e in judged.values()
               if "skipped" not in e)
    assert judged["output_out_of_range_ratio"]["verdict"] == "FAIL"


@pytest.mark.parametrize("fault", ["noise", "black"])
def test_decoded_random_latents_are_reported_not_judged_and_nan_still_fails(fault: str) -> None:
    """A loaded decoder's output from random latents is no natural picture: a noise-like or black
    output is reported with what the rule would say; a NaN in it still fails."""
    broken = PLANTED_VIDEOS[fault][0](structured_clip())
    broken[0, 0, 0, 0, 0] = float("nan")
    task = VideoDecodeTask(latent_channels=4, spatial_compression=8, temporal_compression=8)
    entries = output_checks({"video": broken}, task, {"kind": "loaded"})
    assert entries[PLANTED_VIDEOS[fault][1]]["would_be"] == "FAIL"
    assert {n for n, e in entries.items() if e.get("verdict")} == {"output_nonfinite"}
    assert entries["output_nonfinite"]["verdict"] == "FAIL"
    assert all(e["not_judged"] == NOT_NATURAL for n, e in entries.items()
               if n != "output_nonfinite" and "skipped" not in e)


def test_a_check_the_reference_fails_too_is_not_judged_on_the_device() -> None:
    noise = PLANTED_VIDEOS["noise"][0](structured_clip())
    task = NaturalVideo(latent_channels=4, spatial_compression=8, temporal_compression=8)
    alone = output_checks({"video": noise}, task, {"kind": "loaded"})
    beside = output_checks({"video": noise}, task, {"kind": "loaded"},
                           reference={"video": noise.double()})
    assert alone["output_spectral_exponent"]["verdict"] == "FAIL"
    assert beside["output_spectral_exponent"]["verdict"] is None
    assert beside["output_spectral_exponent"]["would_be"] == "FAIL"
    assert "reference output does not pass" in beside["output_spectral_exponent"]["not_judged"]
    good = output_checks({"video": noise}, task, {"kind": "loaded"},
                         reference={"video": structured_clip()})
    # the reference passes: the device is judged
    assert good["output_spectral_exponent"]["verdict"] == "FAIL"


def test_image_task_outputs_and_rule_overrides() -> None:
    task = NaturalImage(latent_channels=4, spatial_compression=8)
    flat = torch.zeros(2, 3, H, W)
    outputs = {"image": flat, "tokens": torch.zeros(1, 4, 4)}
    entries = output_checks(outputs, task, {"kind": "loaded"},
                            rules={"output_flat_frames": {"max": 1.0, "source": "my team"}})
    assert entries["image/output_flat_frames"]["verdict"] == "PASS"
    assert entries["image/output_flat_frames"]["source"] == "my team"
    assert entries["image/output_spectral_exponent"] == {
        "skipped": "every frame is flat (see output_flat_frames): no spectrum to judge"}
    tokens = [name for name in entries if name.startswith("tokens/")]
    assert tokens == ["tokens/output_nonfinite"]  # no declared range: not a picture


def test_spectral_exponent_matches_a_planted_power_law() -> None:
    """A random-phase field with power 1/f^2 reads alpha ~2; white noise ~0 (the rule's anchors)."""
    generator = torch.Generator().manual_seed(0)
    fy = torch.fft.fftfreq(128).view(-1, 1)
    fx = torch.fft.rfftfreq(128).view(1, -1)
    radius = torch.sqrt(fy * fy + fx * fx).clamp_min(1.0 / 128)
    phase = torch.rand(radius.shape, generator=generator) * 2 * math.pi
    spectrum = radius.pow(-1.0) * torch.polar(torch.ones_like(phase), phase)
    field = torch.fft.irfft2(spectrum, s=(128, 128))
    assert spectral_exponent(field).alpha == pytest.approx(2.0, abs=0.3)
    noise = torch.rand(128, 128, generator=generator)
    assert spectral_exponent(noise).alpha == pytest.approx(0.0, abs=0.5)
