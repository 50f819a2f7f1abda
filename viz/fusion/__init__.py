"""Which ops became which kernel, from which line, and where the time goes.

- `map`: the fusion map from XLA's own metadata (name stacks, source locations, op
  kinds), and its coverage;
- `profile`: per-kernel time under `jax.profiler` (runs in the worker);
- `report`: both added to a Report (the map on request, the profile after timing);
- `view`: kernel colours, tinted source, tables and charts for the app (no jax).
"""
