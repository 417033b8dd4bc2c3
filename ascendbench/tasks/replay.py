"""Record what one method of a submodule returns during a pass, then return exactly that in the next pass.

The tokenizer's "encoder + FSQ on fixed latents" gate uses it on the VAE's ``encode``: the second tokenize
gets the first one's latents back (copies), so only what runs after the VAE can make the tokens differ::

    replay = Replay(model.video_tokenizer.vae, "encode")
    with replay.recording():
        first = model.tokenize(video)
    with replay.replaying():
        second = model.tokenize(video)      # the same latents; the encoder and the quantiser run again

Works for methods returning tensors (and lists/tuples/dicts of them) and for upstream's data-dict style
(``encode(data_dict) -> data_dict`` with the latents written in): a recorded dict is merged into the dict
argument of the replayed call, which is returned. The method is set on the instance for the block and
removed afterwards (the class's method shows through again).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from ascendbench.errors import TaskError


def _copy(value: Any) -> Any:
    """A copy whose tensors are cloned (containers rebuilt), so a later in-place change cannot reach it."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(item) for item in value)
    return value


class Replay:
    """Record, then replay, the return values of ``owner.<method>`` (see the module docstring).

    Args:
        owner: the object whose method is recorded (e.g. a VAE module).
        method: the method's name (e.g. ``encode``).
    """

    def __init__(self, owner: Any, method: str) -> None:
        found = getattr(owner, method, None)
        if not callable(found) or isinstance(found, torch.nn.Module):  # a submodule cannot be swapped for a function
            raise TaskError(f"{type(owner).__name__} has no method {method!r} to replay; fix "
                            "model.task.latent_method (or set model.task.latent_module: null).")
        self.owner, self.method = owner, method
        self.recorded: list[Any] = []

    @contextmanager
    def _installed(self, wrapper: Callable[..., Any]) -> Iterator[None]:
        had_own = self.method in vars(self.owner)
        before = vars(self.owner).get(self.method)
        setattr(self.owner, self.method, wrapper)
        try:
            yield
        finally:
            if had_own:
                setattr(self.owner, self.method, before)
            else:
                delattr(self.owner, self.method)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """Call the method as usual and keep a copy of each return value, in call order."""
        original = getattr(self.owner, self.method)
        self.recorded = []

        def record(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self.recorded.append(_copy(result))
            return result

        with self._installed(record):
            yield

    @contextmanager
    def replaying(self) -> Iterator[None]:
        """Return the recorded values again, in the same order, without calling the method."""
        pending = list(self.recorded)

        def replay(*args: Any, **kwargs: Any) -> Any:
            if not pending:
                raise TaskError(f"{type(self.owner).__name__}.{self.method} was called more often than while "
                                f"recording ({len(self.recorded)} call(s)); the replayed pass is not the same pass.")
            value = _copy(pending.pop(0))
            if isinstance(value, dict) and args and isinstance(args[0], dict):
                args[0].update(value)
                return args[0]
            return value

        with self._installed(replay):
            yield
