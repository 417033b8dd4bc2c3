"""The patch registry: named, checked, reversible changes to third-party code (model.patches)."""

from __future__ import annotations

import inspect
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator, Mapping, Sequence

from omegaconf import DictConfig, ListConfig, OmegaConf

from ascendbench.errors import PatchError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    """A named constraint: ``test(patch, target)`` is ``None`` when met, else the reason."""

    name: str
    test: Callable[[Any, Any], str | None]


class Patch:
    """A registered patch: keyword options, ``apply(target)`` -> record, ``restore()`` undoes."""

    name: ClassVar[str] = ""
    checks: ClassVar[tuple[Check, ...]] = ()
    install_hint: ClassVar[str] = ""
    default_devices: ClassVar[tuple[str, ...] | None] = None

    def apply(self, target: Any) -> dict[str, Any]:
        """Patch ``target`` (the loaded model); return a description of what changed."""
        raise NotImplementedError

    def skip_reason(self, dtype: str | None) -> str | None:
        """Why this patch must not apply to a run in ``dtype`` (``None``: apply)."""
        return None

    def restore(self) -> None:
        """Undo :meth:`apply`; safe to call after a partial or no application."""
        raise NotImplementedError


_REGISTRY: dict[str, type[Patch]] = {}


def register_patch(name: str, *, checks: Sequence[Check] = (), install_hint: str = "",
                   devices: Sequence[str] | None = None) -> Callable[[type[Patch]], type[Patch]]:
    """Register a :class:`Patch` as ``name``; ``devices``: where it applies (None: all)."""

    def decorator(cls: type[Patch]) -> type[Patch]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"a patch named {name!r} is already registered "
                             f"({_REGISTRY[name].__qualname__})")
        cls.name, cls.checks, cls.install_hint = name, tuple(checks), install_hint
        cls.default_devices = tuple(devices) if devices is not None else None
        _REGISTRY[name] = cls
        return cls

    return decorator


def available_patches() -> list[str]:
    """Names of the registered patches."""
    return sorted(_REGISTRY)


def get_patch(name: str) -> type[Patch]:
    """The patch class registered as ``name``, or a :class:`PatchError` listing the names."""
    if name not in _REGISTRY:
        raise PatchError(
            f"model.patches names {name!r}, which is not a registered patch; registered: "
            f"{', '.join(available_patches()) or 'none'}. Fix the name in the model config or on "
            "the command line (e.g. `model.patches=[flex_attention_dense]`).")
    return _REGISTRY[name]


@dataclass(frozen=True)
class PatchSpec:
    """One entry of ``model.patches``: the name, the device types, the options."""

    name: str
    devices: tuple[str, ...] | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def applies_on(self, device_type: str) -> bool:
        """Whether the patch applies on this device type."""
        devices = self.devices if self.devices is not None else get_patch(self.name).default_devices
        return devices is None or device_type in devices


def parse_specs(value: Any) -> list[PatchSpec]:
    """``model.patches`` (None, a list of names and/or mappings) -> specs, or a clear error."""
    if isinstance(value, (DictConfig, ListConfig)):
        value = OmegaConf.to_container(value, resolve=True)
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise PatchError(f"model.patches={value!r} must be a list of patch names or mappings with "
                         "a `name`.")
    specs = []
    for entry in value:
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, Mapping) or "name" not in entry:
            raise PatchError(
                f"model.patches entry {entry!r} is neither a patch name nor a mapping with a "
                "`name` key; write e.g. `- flex_attention_dense` or "
                "`- {name: flex_attention_dense, devices: [npu]}`.")
        get_patch(entry["name"])
        devices = entry.get("devices")
        options = {k: v for k, v in entry.items() if k not in ("name", "devices", "reference")}
        specs.append(PatchSpec(entry["name"], None if devices is None else tuple(devices), options))
    return specs


def build_patch(spec: PatchSpec) -> Patch:
    """The patch of ``spec`` built with its options (unknown options are named in the error)."""
    cls = get_patch(spec.name)
    accepted = [p for p in inspect.signature(cls).parameters if p not in ("self", "args", "kwargs")]
    unknown = sorted(set(spec.options) - set(accepted))
    if unknown:
        raise PatchError(
            f"patch {spec.name!r} has no option(s) {', '.join(unknown)}; its options are "
            f"{', '.join(accepted) or 'none'} (plus `devices`). Fix the entry in model.patches.")
    return cls(**spec.options)


@contextmanager
def patches_applied(specs: Any, target: Any, device_type: str,
                    dtype: str | None = None) -> Iterator[list[dict[str, Any]]]:
    """Apply the patches of ``specs``, restored on exit; yields each one's result or skip reason."""
    applied: list[Patch] = []
    infos: list[dict[str, Any]] = []
    try:
        for spec in parse_specs(specs):
            info: dict[str, Any] = {"name": spec.name, "options": dict(spec.options)}
            infos.append(info)
            if not spec.applies_on(device_type):
                devices = list(spec.devices or get_patch(spec.name).default_devices)
                info["skipped"] = f"not applied on {device_type} (devices: {devices})"
                continue
            patch = build_patch(spec)
            if reason := patch.skip_reason(dtype):
                log.warning("patch %s not applied: %s", spec.name, reason)
                info["skipped"] = reason
                continue
            for check in patch.checks:
                if reason := check.test(patch, target):
                    hint = f" {patch.install_hint}" if patch.install_hint else ""
                    raise PatchError(f"patch {patch.name!r} cannot apply: check {check.name!r} "
                                     f"failed: {reason}.{hint}")
            applied.append(patch)
            info.update(patch.apply(target))
            log.info("patch %s applied on %s: %s", spec.name, device_type, info)
        yield infos
    finally:
        failures = []
        for patch in reversed(applied):
            try:
                patch.restore()
            except Exception as exc:  # keep restoring the others; the first failure is re-raised
                log.error("restoring patch %s failed: %s", patch.name, exc)
                failures.append(exc)
        if failures:
            raise failures[0]
