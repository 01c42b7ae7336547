"""Weight publication and versioning: the trainer publishes, generators swap weights in flight.

After each optimiser step the trainer turns its state dict into plain numpy arrays, `ray.put`s
them once into the object store and tells a tiny `WeightRegistry` actor "version v is at this
ObjectRef" (the put and the registration on a background thread, beside the next step:
`BackgroundPublisher`). A generator's `WeightSubscriber` keeps a long poll open on the registry and checks it
(without blocking) from inside the decoding loop (generate_rollouts' weight_update_hook); new
weights are copied into its model in place, so the sequences in progress keep their KV cache
(PipelineRL in-flight updates; ScaleRL arXiv 2510.13786 section 4).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

# torch is imported where tensors are touched, so that the registry actor and generators that
# only pass snapshots along (simulated devices, vLLM) start without it.


def _bit_views() -> dict:
    """numpy has no bfloat16: such tensors travel as int16 bit patterns and are viewed back."""
    import torch

    return {torch.bfloat16: torch.int16}


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
    """Copy the model's tensors to sync (models.lora.state_to_sync: the state dict, or a LoRA
    model's adapters) to CPU numpy arrays (bfloat16 kept bit-exact as int16)."""
    from scalerl.models.lora import state_to_sync

    bit_views = _bit_views()
    arrays, dtypes = {}, {}
    for name, tensor in state_to_sync(model).items():
        tensor = tensor.detach().to("cpu")
        dtypes[name] = str(tensor.dtype).removeprefix("torch.")
        if tensor.dtype in bit_views:
            tensor = tensor.view(bit_views[tensor.dtype])
        arrays[name] = tensor.numpy().copy()
    return WeightSnapshot(version=int(version), arrays=arrays, dtypes=dtypes)


def load_snapshot(model: torch.nn.Module, snapshot: WeightSnapshot) -> None:
    """Copy a snapshot into the model's existing tensors, in place (no new modules, KV cache kept).

    Raises KeyError if the snapshot lacks one of the model's tensors to sync (a different
    architecture, or adapters on one side only).
    """
    import torch

    from scalerl.models.lora import state_to_sync

    bit_views = _bit_views()
    state = state_to_sync(model)
    with torch.no_grad(), warnings.catch_warnings():
        # arrays from the object store are read-only; they are only read here (copied into place)
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        for name, target in state.items():
            source = torch.from_numpy(np.asarray(snapshot.arrays[name]))
            dtype = getattr(torch, snapshot.dtypes[name])
            if dtype in bit_views:
                source = source.view(dtype)
            target.copy_(source.to(device=target.device, dtype=target.dtype))


class WeightRegistry:
    """Holds the latest published (version, ObjectRef). Run as an async Ray actor, num_cpus=0.

    The ObjectRef is passed wrapped in a list so that Ray hands the reference itself (not the
    weights) to this actor; the registry keeps it alive until a newer version replaces it.
    `wait_newer(v)` is a long poll: it returns as soon as a version newer than v is published,
    so a generator learns about new weights without paying a round trip per decoding step.
    """

    def __init__(self) -> None:
        self._version = -1
        self._wrapped_ref: list = []
        self._changed = None  # asyncio.Event of the current version, created in the actor's loop

    def _event(self):
        import asyncio

        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    async def publish(self, version: int, wrapped_ref: list) -> int:
        if int(version) > self._version:
            self._version, self._wrapped_ref = int(version), list(wrapped_ref)
            changed, self._changed = self._event(), None
            changed.set()  # wakes every wait_newer of older versions
        return self._version

    async def wait_newer(self, version: int) -> tuple[int, list]:
        while self._version <= int(version):
            await self._event().wait()
        return self._version, self._wrapped_ref

    async def latest_version(self) -> int:
        return self._version

    async def latest(self) -> tuple[int, list]:
        return self._version, self._wrapped_ref


def publish_weights(registry, model: torch.nn.Module, version: int) -> float:
    """Snapshot, put into the object store, register (not waiting for the acknowledgement:
    calls from one caller to one actor run in order); returns the seconds it took."""
    import ray

    started = time.perf_counter()
    snapshot_ref = ray.put(snapshot_weights(model, version))
    registry.publish.remote(int(version), [snapshot_ref])
    return time.perf_counter() - started


def _put_and_register(registry, snapshot: WeightSnapshot, put) -> None:
    registry.publish.remote(snapshot.version, [put(snapshot)])


class BackgroundPublisher:
    """Object-store publication off the optimiser step's critical path.

    `publish` copies the weights at once (the next step changes them in place) and returns; the
    `ray.put` into the object store and the registration run on one background thread, in
    version order, while the trainer goes on with its next step. A generator that needs that
    version waits for it (WeightSubscriber.sync), so the staleness rule is unchanged. A failure
    of the background work is raised by the next `publish` (or `wait`).
    """

    def __init__(self, registry, put=None) -> None:
        """`put`: how a snapshot enters the object store (default ray.put), returning its ref."""
        from concurrent.futures import ThreadPoolExecutor

        if put is None:
            import ray

            put = ray.put
        self._registry, self._put = registry, put
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scalerl-publish")
        self._last = None  # the Future of the newest version handed to the thread

    def publish(self, model: torch.nn.Module, version: int) -> float:
        """Snapshot now, put and register in the background; the seconds the caller spent."""
        started = time.perf_counter()
        self._raise_failure()
        snapshot = snapshot_weights(model, version)
        self._last = self._worker.submit(_put_and_register, self._registry, snapshot, self._put)
        return time.perf_counter() - started

    def wait(self) -> None:
        """Block until every version handed over is registered (re-raising a failure)."""
        if self._last is not None:
            self._last.result()

    def _raise_failure(self) -> None:
        if self._last is not None and self._last.done():
            self._last.result()  # raises what the background put raised


class WeightSubscriber:
    """A generator's view of the registry: swaps newer published weights into its model.

    Keeps one long poll (`wait_newer`) open; checking it is a local, non-blocking `ray.wait`, so
    the hook costs microseconds per decoding step until new weights actually arrive. When they do,
    they are copied into the model in place (KV cache kept). `sync_seconds` accumulates the time
    spent fetching and loading weights (and waiting for a required version).
    """

    def __init__(self, registry, poll_interval_seconds: float = 0.0) -> None:
        self._registry = registry
        self._poll_interval_seconds = float(poll_interval_seconds)
        self._last_check = 0.0
        self._watch = None
        self.version = -1
        self.sync_seconds = 0.0
        self.num_swaps = 0

    def _watch_ref(self):
        if self._watch is None:
            self._watch = self._registry.wait_newer.remote(self.version)
        return self._watch

    def _take(self, target, started: float) -> int:
        """Load the weights the (resolved) long poll points to into `target` (a torch model, i.e.
        anything with a state_dict, or a callable taking a WeightSnapshot, e.g. another
        backend's loader)."""
        import ray

        version, wrapped_ref = ray.get(self._watch)
        self._watch = None
        snapshot = ray.get(wrapped_ref[0])
        if callable(target) and not hasattr(target, "state_dict"):
            target(snapshot)
        else:
            load_snapshot(target, snapshot)
        self.version = version
        self.num_swaps += 1
        self.sync_seconds += time.perf_counter() - started
        return version

    def sync(self, model, min_version: int = 0) -> int:
        """Before a batch: take any newer weights; block until a version >= min_version is loaded."""
        import ray

        while True:
            started = time.perf_counter()
            ref = self._watch_ref()
            if self.version >= min_version and not ray.wait([ref], timeout=0)[0]:
                return self.version
            self._take(model, started)

    def maybe_update(self, model: torch.nn.Module) -> int | None:
        """The weight_update_hook body: the new version if weights were swapped, else None."""
        import ray

        now = time.perf_counter()
        if now - self._last_check < self._poll_interval_seconds:
            return None
        self._last_check = now
        if not ray.wait([self._watch_ref()], timeout=0)[0]:
            return None
        return self._take(model, now)

    def hook_for(self, model: torch.nn.Module):
        """A zero-argument weight_update_hook bound to `model` (see generate_rollouts)."""
        return lambda: self.maybe_update(model)


def registry_handle(registry):
    """The weight registry actor: `registry` itself, or the named actor when given its name.

    The pipeline passes the name: an actor handle among the constructor arguments of a
    restartable actor is an object-store reference, which Ray warns about at ERROR level
    (ray-project/ray#53727); a name is plain data and a restarted actor looks it up again."""
    if isinstance(registry, str):
        import ray

        return ray.get_actor(registry)
    return registry
