"""Weight publication by broadcast (pipeline.weight_sync = "broadcast"): the trainer sends each
new version over the weight-sync process group (collective.py), each generator receives it on a
background thread and swaps it in between decoding steps.

The trainer's send overlaps its next optimiser step (BroadcastPublisher). The same interface as
object_store.py's path (`publish` on the trainer; `sync`,
`maybe_update`, `hook_for`, `version`, `sync_seconds`, `num_swaps` on a generator), so the
actors and the staleness rule are unchanged. A version is a header (one int64 broadcast) and then
the buckets of broadcast.model_bucket_plan. A generator's thread receives into fresh buffers and
hands the finished version over by swapping one reference, so the decoding loop never sees half
a version; the copy into the model happens in the loop, in place (KV cache kept).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from scalerl.distributed.weight_sync.collective import (
    WeightGroup,
    flatten_buckets,
    model_bucket_plan,
    receive_weights,
    send_flat,
)

if TYPE_CHECKING:
    import torch


def state_to_sync(model: torch.nn.Module) -> dict:
    """models.lora.state_to_sync (imported here: torch is imported where tensors are touched)."""
    from scalerl.models.lora import state_to_sync as tensors_to_sync

    return tensors_to_sync(model)


class BroadcastPublisher:
    """The trainer's side (rank 0): `publish(model, version)` sends one version to every generator.

    The send overlaps the trainer's next step: `publish` copies the buckets at once (the step
    changes the weights in place) and returns; one background thread broadcasts the header and
    the buckets. One version is on the wire at a time: the next `publish` first waits for the
    previous send (so at most one extra copy of the weights exists) and raises its failure. A
    generator that needs a version waits for it (BroadcastSubscriber.sync): the staleness rule
    is unchanged.
    """

    def __init__(self, model: torch.nn.Module, bucket_mb: float, group: WeightGroup) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.plan = model_bucket_plan(state_to_sync(model), bucket_mb)
        self.group = group
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scalerl-broadcast")
        self._sending = None  # the Future of the version on the wire
        self.send_seconds = 0.0  # the background sends' own time, summed

    def publish(self, model: torch.nn.Module, version: int) -> float:
        """Wait for the previous send, copy `version`'s buckets, hand them to the sending thread;
        the seconds the caller spent (a send the last step did not cover shows up here)."""
        started = time.perf_counter()
        self.wait()
        device = next(model.parameters()).device  # NCCL sends from the GPU
        flats = flatten_buckets(state_to_sync(model), self.plan)
        self._sending = self._worker.submit(self._send, int(version), flats, device)
        return time.perf_counter() - started

    def _send(self, version: int, flats: list, device) -> None:
        import torch

        started = time.perf_counter()
        self.group.broadcast(torch.tensor([version], dtype=torch.int64, device=device), 0)
        send_flat(flats, self.group)
        self.send_seconds += time.perf_counter() - started

    def wait(self) -> None:
        """Block until the version handed over is sent (re-raising a failure of its send)."""
        if self._sending is not None:
            sending, self._sending = self._sending, None
            sending.result()


class BroadcastSubscriber:
    """A generator's side: a daemon thread receives every version; the decoding loop swaps the
    newest received one into its model (WeightSubscriber's interface)."""

    def __init__(self, model: torch.nn.Module, bucket_mb: float, group: WeightGroup) -> None:
        state = state_to_sync(model)
        self.plan = model_bucket_plan(state, bucket_mb)
        self.group = group
        self._template = {name: (t.shape, t.dtype, t.device) for name, t in state.items()}
        self._device = next(model.parameters()).device
        self._latest: tuple[int, dict] | None = None  # (version, tensors), replaced whole
        self._arrived = threading.Condition()
        self.version = -1
        self.sync_seconds = 0.0
        self.num_swaps = 0
        self.failure: BaseException | None = None
        threading.Thread(target=self._receive_forever, name="weight-broadcast", daemon=True).start()

    def _receive_forever(self) -> None:
        import torch

        try:
            while True:
                header = torch.empty(1, dtype=torch.int64, device=self._device)
                self.group.broadcast(header, 0)
                state = {
                    name: torch.empty(shape, dtype=dtype, device=device)
                    for name, (shape, dtype, device) in self._template.items()
                }
                receive_weights(state, self.plan, self.group)
                with self._arrived:
                    self._latest = (int(header.item()), state)
                    self._arrived.notify_all()
        except BaseException as error:  # noqa: BLE001 - reported to the decoding loop, which raises it
            with self._arrived:
                self.failure = error
                self._arrived.notify_all()

    def _take(self, model: torch.nn.Module, started: float) -> int:
        import torch

        version, state = self._latest
        with torch.no_grad():
            for name, target in state_to_sync(model).items():
                target.copy_(state[name])
        self.version = version
        self.num_swaps += 1
        self.sync_seconds += time.perf_counter() - started
        return version

    def sync(self, model: torch.nn.Module, min_version: int = 0) -> int:
        """Before a batch: swap in the newest received version; wait for one >= min_version."""
        started = time.perf_counter()
        with self._arrived:
            while (self._latest is None or self._latest[0] < min_version) and self.failure is None:
                self._arrived.wait()
        if self.failure is not None:
            raise RuntimeError(f"weight broadcast failed: {self.failure}") from self.failure
        if self._latest[0] > self.version:
            return self._take(model, started)
        return self.version

    def maybe_update(self, model: torch.nn.Module) -> int | None:
        """The weight_update_hook body: the new version if one was swapped in, else None."""
        latest = self._latest
        if latest is None or latest[0] <= self.version:
            return None
        return self._take(model, time.perf_counter())

    def hook_for(self, model: torch.nn.Module):
        return lambda: self.maybe_update(model)


def rendezvous_address() -> str:
    """ "ip:port" on this actor's node, a port free now: where the weight-sync group meets."""
    import ray

    from scalerl.distributed.weight_sync.collective import free_address

    return free_address(ray.util.get_node_ip_address())
