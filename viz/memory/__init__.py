"""Where a compiled program's bytes go: the memory profile (issues #54, #59).

`xla` decodes XLA's buffer assignment and scheduled module (protos, read with the
fields `schema` declares to protobuf's runtime; from `memory_analysis()`, or from XLA's
dump of the compile where that holds none, a TPU's), `padding` the bytes a layout's
tiles add, `live` gives each buffer its live range over the schedule as XLA's own
`HloLiveRange` does, `profile` turns them into the report's fields (`model`): the bytes
live at each step, the peak and the buffers that fill it, each with the user's line (or,
where XLA kept none, `lines`' reason). `residuals` (in the worker: it imports jax)
lists what `jax.checkpoint` leaves saved for the backward pass, and `estimate` which
buffers would fill the device when XLA refuses to compile for lack of memory (from the
same program at smaller batches). Everything but `residuals` and `estimate` is jax-free.
"""
