"""Several trainer actors training one policy data parallel (pipeline.num_trainers > 1).

Every trainer actor holds the same policy, optimiser and schedule (built from the same config and
checkpoint). They join torch.distributed's default process group (gloo on CPU, NCCL on GPUs;
`TrainerWorker.join_data_parallel`), so the synchronous trainer's data-parallel step
(scalerl.train.parallel.data_parallel) runs unchanged: each actor receives the whole batch (one object in
Ray's object store, read by all), back-propagates its share of the sequences, the gradients are
summed with all_reduce, and every actor makes the same optimiser step. Rank 0 is the trainer the
rest of the pipeline talks to: it publishes the weights, validates and writes checkpoints; the
other ranks only train. No layer of our own: Ray places the actors, torch.distributed reduces.
"""

from __future__ import annotations

from collections.abc import Sequence


def join_data_parallel(trainers: Sequence) -> None:
    """Open the trainers' data-parallel group at an address on rank 0's node (rank = position)."""
    import ray

    address = ray.get(trainers[0].rendezvous.remote())
    ray.get([trainer.join_data_parallel.remote(address, rank, len(trainers)) for rank, trainer in enumerate(trainers)])


class ReplicaSteps:
    """Hands each batch to every trainer rank; the caller follows rank 0's result, and a failure
    of another rank is raised at the next hand-off (or at `wait_all`) instead of being lost."""

    def __init__(self, trainers: Sequence) -> None:
        self.trainers = list(trainers)
        self.replica_refs: list = []

    def train(self, packed):
        """Rank 0's ObjectRef of `train(packed)`; the batch goes into the object store once."""
        import ray

        self.check()
        if len(self.trainers) == 1:
            return self.trainers[0].train.remote(packed)
        shared = ray.put(packed)
        refs = [trainer.train.remote(shared) for trainer in self.trainers]
        self.replica_refs.extend(refs[1:])
        return refs[0]

    def check(self) -> None:
        """Collect the other ranks' finished steps; their errors are raised here."""
        import ray

        if not self.replica_refs:
            return
        done, self.replica_refs = ray.wait(self.replica_refs, num_returns=len(self.replica_refs), timeout=0)
        ray.get(done)

    def wait_all(self) -> None:
        """Every rank's queued steps finished (raises the first failure)."""
        import ray

        refs, self.replica_refs = self.replica_refs, []
        ray.get(refs)
