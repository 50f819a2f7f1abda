"""`python -m viz.platforms.probe gpu tpu`: which of the named platforms JAX sees, as a
JSON list on the last line of stdout. Run by `viz.platforms.available()` in a child:
it imports jax, which the server never does."""

from __future__ import annotations

import json
import sys

from viz.platforms import PLATFORMS


def main(names: list[str]) -> None:
    seen = [n for n in names if n in PLATFORMS and PLATFORMS[n].present()]
    print(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1:])
