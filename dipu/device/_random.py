"""Random numbers: the default generators and their seeds and states, as ``torch.cuda.random``.

Seeding before the runtime starts is queued (Note [Lazy initialization]); so is setting a state.
"""

from __future__ import annotations

import torch

from dipu._core import _C
from dipu.device._devices import _get_device_index, current_device, device_count
from dipu.device._initialization import _lazy_call


def _default_generators() -> tuple:
    """``torch.dipu.default_generators``: one per device, as torch.cuda's."""
    return tuple(_C.default_generator(i) for i in range(device_count()))


def manual_seed(seed: int) -> None:
    seed = int(seed)
    index = _C.current_device()
    _lazy_call(lambda: _C.default_generator(index).manual_seed(seed), seed=True)


def manual_seed_all(seed: int) -> None:
    seed = int(seed)

    def seed_every_device():
        for gen in _default_generators():
            gen.manual_seed(seed)

    _lazy_call(seed_every_device, seed_all=True)


def seed() -> None:
    index = _C.current_device()
    _lazy_call(lambda: _C.default_generator(index).seed(), seed=True)


def seed_all() -> None:
    def seed_every_device():
        value = _C.default_generator(current_device()).seed()
        for gen in _default_generators():
            gen.manual_seed(value)

    _lazy_call(seed_every_device, seed_all=True)


def initial_seed() -> int:
    return _C.default_generator(current_device()).initial_seed()


def get_rng_state(device="dipu") -> torch.Tensor:
    return _C.default_generator(_get_device_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device="dipu") -> None:
    index, state = _get_device_index(device), new_state.clone()
    _lazy_call(lambda: _C.default_generator(index).set_state(state))


def get_rng_state_all() -> list[torch.Tensor]:
    return [gen.get_state() for gen in _default_generators()]


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
