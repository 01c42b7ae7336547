"""One batch of rollouts as arrays: the packed buffers that cross between generator and trainer
(packed_rollouts), the decoder's per-step grid they are packed from (token_grid) and the
per-sequence columns a step's bookkeeping reads (batch_columns). numpy only.
"""
