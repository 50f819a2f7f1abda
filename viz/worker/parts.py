"""The parts of a reply that follow its head (issue #52).

A reply whose JSON would be large sends its head first, naming the parts to come
(`Reply.wire`), then each part in a frame of its own, its text attached as it is
(`viz.worker.frames`). The client hands the head to its caller at once and reads the
parts behind it, into `Parts`; whoever reads a part first waits until it is in. An
analysis's parts are XLA's cost and memory analyses, which the worker makes once the
head is on its way (0.03 s at 24 layers, 0.2 s at 96), then its fusion map, the
compiled program's graph (which the Overview folds to read), texts and other graph
models: 22 MB of JSON for a 96-layer model, each decoded only where it is read. No jax.
"""

from __future__ import annotations

import threading


class Parts:
    """Named texts on their way, filled by the thread that reads the worker's pipe.
    Thread-safe: `take` waits until its part is in, or until no more will come."""

    def __init__(self, names: list[str]):
        self.names = list(names)
        self._texts: dict[str, str] = {}
        self._arrived: set[str] = set()
        self._changed = threading.Condition()
        self._closed = False
        self.failure = ""  # why the parts stopped coming, when they did

    def put(self, name: str, text: str) -> None:
        with self._changed:
            if name in self.names:
                self._texts[name] = text
                self._arrived.add(name)
                self._changed.notify_all()

    def close(self, failure: str = "") -> None:
        """No more parts will come (`failure`: why some did not)."""
        with self._changed:
            self._closed = True
            self.failure = self.failure or failure
            self._changed.notify_all()

    @property
    def missing(self) -> list[str]:
        with self._changed:
            return [n for n in self.names if n not in self._arrived]

    def take(self, name: str) -> str | None:
        """Part `name`, once it is in, handed over once: whoever decodes it keeps what
        it makes, not a second copy (None: it never came)."""
        with self._changed:
            self._changed.wait_for(lambda: name in self._arrived or self._closed)
            return self._texts.pop(name, None)
