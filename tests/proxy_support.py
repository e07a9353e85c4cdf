"""A TCP proxy for tests that cut a client's connection mid-answer (``CuttingProxy``).

A support module, not a test module: ``tests/client/test_client_servers.py``,
``tests/js/test_links_client.py`` and ``tests/browser`` import it from here.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading

#: A request head in what a client sent (a body before it, a JSON one, has no CR LF pair).
_HEAD = re.compile(r"(?:GET|POST) [^\r\n]* HTTP/1\.1\r\n.*?\r\n\r\n", re.DOTALL)


class CuttingProxy:
    """A TCP proxy on loopback: the n-th connection's answer is cut after ``cuts[n]`` bytes.

    A cut sends that many bytes of the server's answer (headers included), then closes
    both sockets: the client sees the body end mid-message, the server a disconnect.
    Connections past the list are passed whole. ``sent`` keeps what clients sent.
    """

    def __init__(self, host: str, port: int, cuts: list[int]) -> None:
        self.upstream = (host, port)
        self.cuts = list(cuts)
        self.made = 0
        self.sent = bytearray()
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                budget = self.cuts.pop(0) if self.cuts else None
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._up, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, budget), daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                with self.lock:
                    self.sent += data
                upstream.sendall(data)

    def _down(self, upstream: socket.socket, client: socket.socket, budget: int | None) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if budget is not None and len(data) >= budget:
                    client.sendall(data[:budget])
                    with self.lock:
                        self.made += 1
                    break
                if budget is not None:
                    budget -= len(data)
                client.sendall(data)
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def requests(self) -> list[str]:
        """The request heads clients sent, each its request line and headers (lower-cased)."""
        with self.lock:
            text = bytes(self.sent).decode("latin-1")
        return [m.group(0).lower() for m in _HEAD.finditer(text)]

    def close(self) -> None:
        self.listener.close()


class AnswerCuttingProxy(CuttingProxy):
    """A ``CuttingProxy`` that cuts one request's answer, whichever connection carries it.

    A browser reuses its connections (keep-alive), so the n-th connection is no request in
    particular: here the answer to the first request whose request line starts with
    ``target`` (``"POST /agent/run "``) is cut after ``budget`` bytes (headers included);
    every other answer is passed whole. The budget is armed before the request goes
    upstream, so every byte counted is that answer's (a client sends its next request on
    a connection only once the last answer is whole).
    """

    def __init__(self, host: str, port: int, target: str, budget: int) -> None:
        self.target = target.encode("latin-1")
        self.budget = budget
        self.armed = False
        super().__init__(host, port, [])

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            left: list[int | None] = [None]  # this connection's budget, once its request is the target
            threading.Thread(target=self._watch_up, args=(client, upstream, left), daemon=True).start()
            threading.Thread(target=self._watch_down, args=(upstream, client, left), daemon=True).start()

    def _watch_up(self, client: socket.socket, upstream: socket.socket, left: list[int | None]) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                with self.lock:
                    self.sent += data
                    if not self.armed and data.startswith(self.target):
                        self.armed = True
                        left[0] = self.budget
                upstream.sendall(data)

    def _watch_down(self, upstream: socket.socket, client: socket.socket, left: list[int | None]) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                with self.lock:
                    budget = left[0]
                    if budget is not None:
                        left[0] = budget - len(data)
                if budget is not None and len(data) >= budget:
                    client.sendall(data[:budget])
                    with self.lock:
                        self.made += 1
                    break
                client.sendall(data)
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
