"""Where a compiled program's bytes go: the memory profile (issue #54).

`xla` decodes XLA's buffer assignment and scheduled module (protos, read with the
fields `schema` declares to protobuf's runtime),
`live` gives each buffer its live range over the schedule as XLA's own `HloLiveRange`
does, `profile` turns them into the report's fields (`model`): the bytes live at each
step, the peak and the buffers that fill it, each with the user's line. `residuals`
(in the worker: it imports jax) lists what `jax.checkpoint` leaves saved for the
backward pass. Everything but `residuals` is jax-free.
"""
