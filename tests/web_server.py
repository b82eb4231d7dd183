"""A plain web server on loopback, for the tests of an endpoint that answers HTTP but is not S3 (issue 71 §4):
Python's http.server over an empty folder, so GET and HEAD answer 404 and PUT and DELETE 501. It notes each
request's method and path, so a test can tell which write reached it first."""

from __future__ import annotations

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _NotingHandler(SimpleHTTPRequestHandler):
    def __init__(self, *args, requests: list[tuple[str, str]], **kwargs) -> None:
        self._requests = requests
        super().__init__(*args, **kwargs)

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        if parsed:
            self._requests.append((self.command, self.path))
        return parsed

    def log_message(self, format, *args) -> None:
        pass


class WebServer:
    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.requests: list[tuple[str, str]] = []
        handler = partial(_NotingHandler, directory=str(folder), requests=self.requests)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
