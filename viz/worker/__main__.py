"""`python -m viz.worker`: the child process that runs user code."""

from viz.worker.child import serve

serve()
