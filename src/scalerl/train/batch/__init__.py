"""One batch of rollouts as arrays (packed_rollouts): the packed buffers that cross between
generator and trainer, the decoder's per-step grid they are packed from and the per-sequence
columns a step's bookkeeping reads. numpy only.
"""
