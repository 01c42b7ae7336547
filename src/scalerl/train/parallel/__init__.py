"""One batch's gradient from pieces: shards of the batch across trainer processes (data_parallel)
and micro-batches on one process (micro_batches). Each piece's loss is weighted as part of the
whole batch, so the pieces' gradients sum to the whole batch's gradient.
"""
