"""Weight publication and versioning: the trainer publishes, generators swap weights in flight.

After each optimiser step the trainer turns its state dict into plain numpy arrays, `ray.put`s
them once into the object store and tells a tiny `WeightRegistry` actor "version v is at this
ObjectRef". A generator's `WeightSubscriber` polls the registry (at most every
`poll_interval_seconds`) from inside the decoding loop (generate_rollouts' weight_update_hook) and
copies new weights into its model in place, so the sequences in progress keep their KV cache
(PipelineRL in-flight updates; ScaleRL arXiv 2510.13786 section 4).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch

# numpy has no bfloat16: such tensors travel as int16 bit patterns and are viewed back.
_BIT_VIEWS = {torch.bfloat16: torch.int16}


@dataclass(frozen=True)
class WeightSnapshot:
    """The weights of one policy version as numpy arrays (what goes into the object store)."""

    version: int
    arrays: dict[str, np.ndarray]
    dtypes: dict[str, str]

    @property
    def num_bytes(self) -> int:
        return int(sum(array.nbytes for array in self.arrays.values()))


def snapshot_weights(model: torch.nn.Module, version: int) -> WeightSnapshot:
    """Copy the model's state dict to CPU numpy arrays (bfloat16 kept bit-exact as int16)."""
    arrays, dtypes = {}, {}
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().to("cpu")
        dtypes[name] = str(tensor.dtype).removeprefix("torch.")
        if tensor.dtype in _BIT_VIEWS:
            tensor = tensor.view(_BIT_VIEWS[tensor.dtype])
        arrays[name] = tensor.numpy().copy()
    return WeightSnapshot(version=int(version), arrays=arrays, dtypes=dtypes)


def load_snapshot(model: torch.nn.Module, snapshot: WeightSnapshot) -> None:
    """Copy a snapshot into the model's existing tensors, in place (no new modules, KV cache kept).

    Raises KeyError if the snapshot lacks one of the model's tensors (a different architecture).
    """
    state = model.state_dict()
    with torch.no_grad(), warnings.catch_warnings():
        # arrays from the object store are read-only; they are only read here (copied into place)
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        for name, target in state.items():
            source = torch.from_numpy(np.asarray(snapshot.arrays[name]))
            dtype = getattr(torch, snapshot.dtypes[name])
            if dtype in _BIT_VIEWS:
                source = source.view(dtype)
            target.copy_(source.to(device=target.device, dtype=target.dtype))


class WeightRegistry:
    """Holds the latest published (version, ObjectRef). Run as a Ray actor with num_cpus=0.

    The ObjectRef is passed wrapped in a list so that Ray hands the reference itself (not the
    weights) to this actor; the registry keeps it alive until a newer version replaces it.
    """

    def __init__(self) -> None:
        self._version = -1
        self._wrapped_ref: list = []
        self._published_at = 0.0

    def publish(self, version: int, wrapped_ref: list) -> int:
        if int(version) > self._version:
            self._version, self._wrapped_ref = int(version), list(wrapped_ref)
            self._published_at = time.time()
        return self._version

    def latest_version(self) -> int:
        return self._version

    def latest(self) -> tuple[int, list]:
        return self._version, self._wrapped_ref


def publish_weights(registry, model: torch.nn.Module, version: int) -> float:
    """Snapshot, put into the object store, register; returns the seconds it took."""
    import ray

    started = time.perf_counter()
    snapshot_ref = ray.put(snapshot_weights(model, version))
    ray.get(registry.publish.remote(int(version), [snapshot_ref]))
    return time.perf_counter() - started


class WeightSubscriber:
    """A generator's view of the registry: `maybe_update(model)` swaps in newer weights.

    Polls the registry at most every `poll_interval_seconds` (a remote call costs ~1 ms; a
    decoding step of the tiny model a few ms); `poll_interval_seconds=0` polls at every step.
    Records the seconds spent fetching and loading weights (`sync_seconds`).
    """

    def __init__(self, registry, poll_interval_seconds: float = 0.02) -> None:
        self._registry = registry
        self._poll_interval_seconds = float(poll_interval_seconds)
        self._last_poll = 0.0
        self.version = -1
        self.sync_seconds = 0.0
        self.num_swaps = 0

    def sync(self, model: torch.nn.Module, min_version: int = 0) -> int:
        """Load the latest weights now, waiting until a version >= min_version is published."""
        import ray

        started = time.perf_counter()
        while True:
            version, wrapped_ref = ray.get(self._registry.latest.remote())
            if version >= min_version and wrapped_ref:
                break
            time.sleep(0.005)
        if version != self.version:
            load_snapshot(model, ray.get(wrapped_ref[0]))
            self.version = version
            self.num_swaps += 1
        self.sync_seconds += time.perf_counter() - started
        self._last_poll = time.perf_counter()
        return self.version

    def maybe_update(self, model: torch.nn.Module) -> int | None:
        """The weight_update_hook body: the new version if weights were swapped, else None."""
        import ray

        now = time.perf_counter()
        if now - self._last_poll < self._poll_interval_seconds:
            return None
        self._last_poll = now
        if ray.get(self._registry.latest_version.remote()) <= self.version:
            return None
        previous = self.version
        self.sync(model, min_version=previous + 1)
        return self.version

    def hook_for(self, model: torch.nn.Module):
        """A zero-argument weight_update_hook bound to `model` (see generate_rollouts)."""
        return lambda: self.maybe_update(model)
