"""The lessons every JAX user learns the hard way, measured on the user's own code.

- `measure`: the measurements (run in the lessons worker; they import jax): where
  to put jit, compile cost vs program size, a shape sweep, batch-size buckets;
- `verdicts`: the jax-free arithmetic behind each page's verdict (fitted
  exponents, break-even call counts).
"""
