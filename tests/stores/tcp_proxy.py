"""A TCP forwarder this test owns, in front of the shared PostgreSQL: a store behind it can be made
unreachable without touching the server (threads; one per direction per connection).

* :meth:`TcpProxy.cut`: every open connection is closed and new ones are refused (the listening
  socket stays bound but each accepted connection is closed at once) until :meth:`restore`;
* :meth:`TcpProxy.lose_reply_to_commit`: the next ``COMMIT`` a client sends (or the next
  one-statement finish, which commits by itself in autocommit mode: ``stores/sql/queries/finish.py``,
  recognised by its CTE ``"old"`` in the statement text) reaches the server, and the connection is
  then closed before the server's answer comes back: a commit whose outcome the client cannot know.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

#: The text of the one-statement finish (its own commit in autocommit mode).
COMMITTING_STATEMENT = b'"old" AS'


class TcpProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._cut = False
        self._commit_armed: tuple[bytes, ...] | None = None
        self.commits_lost = 0
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def url(self, database_url: str) -> str:
        """``database_url`` (on ``self.target``) through this proxy."""
        host, port = self.target
        return database_url.replace(f"{host}:{port}", f"127.0.0.1:{self.port}", 1)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            doomed, self._open = self._open, []
        for sock in doomed:
            _close(sock)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def lose_reply_to_commit(self) -> None:
        """The next commit: a ``COMMIT``, or the one-statement finish (its own transaction)."""
        self.lose_reply_to(b"COMMIT", COMMITTING_STATEMENT)

    def lose_reply_to(self, *markers: bytes) -> None:
        """The next message a client sends that holds one of ``markers`` (``COMMIT``; ``UPDATE`` for a
        statement in autocommit mode, its own transaction) reaches the server; its answer does not."""
        with self._lock:
            self._commit_armed = markers

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refused = self._cut
            if refused:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                self._open += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                armed_for = self._commit_armed
                if upstream and armed_for is not None and any(m in data for m in armed_for):
                    with self._lock:
                        armed, self._commit_armed = self._commit_armed, None
                    if armed is not None:  # the server has the COMMIT; the client never hears back
                        self.commits_lost += 1
                        _close(src)  # the server side stays open: its answer (the commit done)
                        return  # is read by the other pump, which then fails to relay it
        except OSError:
            pass
        _close(src)
        _close(dst)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@contextlib.contextmanager
def tcp_proxy(target: tuple[str, int]) -> Iterator[TcpProxy]:
    proxy = TcpProxy(target)
    try:
        yield proxy
    finally:
        proxy.close()
