"""One batch's gradient from pieces (data_parallel): shards of the batch across trainer processes
and micro-batches on one process. Each piece's loss is weighted as part of the whole batch, so the
pieces' gradients sum to the whole batch's gradient; and the synchronous run's step plans, broadcast
from rank 0 to the ranks that follow it.
"""
