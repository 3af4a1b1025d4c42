"""Sinks shipped with the package: standard output and an append-only JSON-lines file.
docs/architecture.md, section "The modules, in detail" (runners/governed/sinks.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import TextIO

from alma_schedule.errors import ConfigurationError
from alma_schedule.runners.governed.protocols import Delivery

__all__ = ["FileSink", "StdoutSink", "delivery_line"]


def delivery_line(delivery: Delivery) -> str:
    """The JSON line of a delivery (sorted keys, UTF-8 text kept as is), newline-terminated."""
    return json.dumps(delivery.to_dict(), sort_keys=True, ensure_ascii=False) + "\n"


class StdoutSink:
    """Writes each delivery as a JSON line to standard output (or ``stream``)."""

    identity = "stdout"

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def deliver(self, delivery: Delivery) -> None:
        stream = self._stream if self._stream is not None else sys.stdout
        with self._lock:
            stream.write(delivery_line(delivery))
            stream.flush()


class FileSink:
    """Appends each delivery as a JSON line to ``path`` (``O_APPEND``: one write per line, so
    concurrent processes never interleave a line). The directory must exist."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not str(path):
            raise ConfigurationError("ALMA_SINK=file:PATH needs a path")
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise ConfigurationError(f"ALMA_SINK: the directory of {str(self.path)!r} does not exist")

    @property
    def identity(self) -> str:
        return f"file:{self.path}"

    def __repr__(self) -> str:
        return f"FileSink({str(self.path)!r})"

    def deliver(self, delivery: Delivery) -> None:
        data = delivery_line(delivery).encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(f"short write to {self.path} ({written} of {len(data)} bytes)")
        finally:
            os.close(fd)

    def read(self) -> list[Delivery]:
        """The deliveries written so far (for the demo and tests)."""
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text("utf-8").splitlines():
            if line.strip():
                raw = json.loads(line)
                raw["caps_crossed"] = tuple(raw.get("caps_crossed", ()))
                out.append(Delivery(**raw))
        return out
