"""The jit cache, live and planned.

- `signature`: how a call is keyed and why a miss missed (plain data, no jax);
- `session`: one real jitted function called again and again (worker side);
- `router`: precompiled batch-size buckets that calls are padded to (worker side);
- `planner`: choosing batch-size buckets and scoring their padding (no jax);
- `snippet`: the `lower().compile()` code a user pastes to precompile buckets;
- `story`: the cache lab's one-click story, four calls that show the cache at work.
"""
