"""What runs inside the recorded program's own process (`viz.recording()`, and the child
that `jitscope record` starts).

`start` (`recording()`, jax-free until a recording starts), `recorder` (`Recorder`: each
compile described, its reasons, appended to the journal), `listener` (JAX's monitoring
events and the live stack), `describe` (a compile's arguments, under transformations
too), `arguments` and `values` (a call's leaves as the cache keys them; a static value in
words, never an address), `frameworks` and `unwrap` (the user's function inside equinox,
haiku and flax, and inside `jit(jacfwd(partial(f)))`), `persistent` (the persistent
compilation cache, explained), `distributed` (which process of which multi-process job),
`run` (the program's process under `jitscope record`). Most import jax: the app never
imports them.
"""
