"""How a new policy version reaches the generators (pipeline.weight_sync): through Ray's object
store (object_store: snapshot, registry, subscriber) or by broadcast over a process group
(broadcast: publisher and subscriber, on the bucketed collective of collective). Both paths offer
the same interface to the actors. Imports ray and torch only inside the functions that need them.
"""
