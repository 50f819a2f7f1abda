"""A recording read and shown (no jax: the app server uses it): `views` (the Recordings
page's rows, the call-site tree, what Open in Explore loads), `summary` (the few lines
printed at the program's exit), `html` (one self-contained page, and a notebook cell's
fragment), `compare` (two recordings diffed), `charts` (Plotly figures of a recording and
of a job); a multi-process job: `divergence` (where its processes' compiles part),
`job` (the job view) and `job_views` (its rows and words).
"""
