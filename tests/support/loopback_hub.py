"""A small Hugging Face hub stand-in on 127.0.0.1 for tests: serves fixture repos at fixed commits.

It answers the endpoints huggingface_hub calls to download a dataset repo (repo info by revision,
HEAD/GET on resolve URLs), records every request, and can inject faults per file: HTTP 500s, dropped
connections, truncated bodies and corrupted bodies. Bounded: it serves only while the test holds
it and stops by itself when the context ends (or after ``max_seconds``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.parse
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class HostedRepo:
    repo_id: str
    folder: Path
    commit: str
    aliases: tuple[str, ...] = ("main",)

    def files(self) -> list[str]:
        return sorted(
            str(p.relative_to(self.folder)) for p in self.folder.rglob("*") if p.is_file() and ".cache" not in p.parts
        )


@dataclass
class LoopbackHub:
    repos: dict[str, HostedRepo]
    requests: list[tuple[str, str]] = field(default_factory=list)
    faults: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    max_seconds: float = 300.0

    def __post_init__(self) -> None:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:  # noqa: N802
                hub._serve(self, head=True)

            def do_GET(self) -> None:  # noqa: N802
                hub._serve(self, head=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._deadline = 0.0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> "LoopbackHub":
        self._deadline = time.monotonic() + self.max_seconds
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_fault(self, filename: str, *faults: str) -> None:
        """Queue faults for the next GETs of a file: "500", "drop", "truncate" or "corrupt"."""
        self.faults[filename].extend(faults)

    def downloads_of(self, filename: str) -> int:
        return sum(1 for method, path in self.requests if method == "GET" and path.endswith("/" + filename))

    # --- request handling ---------------------------------------------------------------------------

    def _serve(self, handler: BaseHTTPRequestHandler, *, head: bool) -> None:
        path = urllib.parse.urlparse(handler.path).path
        self.requests.append(("HEAD" if head else "GET", path))
        if time.monotonic() > self._deadline:
            return self._send(handler, 503, b"loopback hub expired", head=head)
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        if parts[:2] == ["api", "datasets"] and "tree" in parts:
            index = parts.index("tree")
            return self._tree(handler, "/".join(parts[2:index]), parts[index + 1], head)
        if parts[:2] == ["api", "datasets"] and "revision" in parts:
            index = parts.index("revision")
            return self._repo_info(handler, "/".join(parts[2:index]), parts[index + 1], head)
        if parts[:1] == ["datasets"] and "resolve" in parts:
            index = parts.index("resolve")
            return self._file(handler, "/".join(parts[1:index]), parts[index + 1], "/".join(parts[index + 2 :]), head)
        return self._send(handler, 404, b'{"error": "not found"}', head=head)

    def _lookup(self, repo_id: str, revision: str) -> HostedRepo | None:
        repo = self.repos.get(repo_id)
        if repo is None or revision not in (repo.commit, *repo.aliases):
            return None
        return repo

    def _repo_info(self, handler, repo_id: str, revision: str, head: bool) -> None:
        repo = self._lookup(repo_id, revision)
        if repo is None:
            return self._send(handler, 404, b'{"error": "Revision Not Found"}', head=head, extra={"X-Error-Code": "RevisionNotFound"})
        body = json.dumps({"id": repo_id, "sha": repo.commit, "private": False, "siblings": [{"rfilename": f} for f in repo.files()]})
        self._send(handler, 200, body.encode(), head=head, extra={"Content-Type": "application/json"})

    def _tree(self, handler, repo_id: str, revision: str, head: bool) -> None:
        repo = self._lookup(repo_id, revision)
        if repo is None:
            return self._send(handler, 404, b'{"error": "Revision Not Found"}', head=head, extra={"X-Error-Code": "RevisionNotFound"})
        entries, folders = [], set()
        for name in repo.files():
            data = (repo.folder / name).read_bytes()
            entries.append({"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()})
            folders.update("/".join(name.split("/")[:i]) for i in range(1, name.count("/") + 1))
        entries += [{"type": "directory", "path": folder, "oid": "0" * 40} for folder in sorted(folders)]
        self._send(handler, 200, json.dumps(entries).encode(), head=head, extra={"Content-Type": "application/json"})

    def _file(self, handler, repo_id: str, revision: str, filename: str, head: bool) -> None:
        repo = self._lookup(repo_id, revision)
        target = (repo.folder / filename) if repo else None
        if repo is None or not target.is_file() or not target.resolve().is_relative_to(repo.folder.resolve()):
            return self._send(handler, 404, b"Entry not found", head=head, extra={"X-Error-Code": "EntryNotFound"})
        body = target.read_bytes()
        etag = hashlib.sha256(body).hexdigest()
        headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{etag}"', "Content-Type": "application/octet-stream"}
        if head:
            return self._send(handler, 200, body, head=True, extra=headers)
        fault = self.faults[filename].pop(0) if self.faults.get(filename) else None
        if fault == "500":
            return self._send(handler, 500, b"Internal Error", head=False)
        if fault == "drop":
            handler.close_connection = True
            handler.connection.shutdown(2)
            return None
        if fault == "truncate":
            handler.send_response(200)
            for key, value in headers.items():
                handler.send_header(key, value)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body[: len(body) // 2])
            handler.close_connection = True
            handler.connection.shutdown(2)
            return None
        if fault == "corrupt":
            body = bytes(len(body))  # same size, all zeros
        self._send(handler, 200, body, head=False, extra=headers)

    @staticmethod
    def _send(handler, status: int, body: bytes, *, head: bool, extra: dict | None = None) -> None:
        handler.send_response(status)
        for key, value in (extra or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if not head:
            handler.wfile.write(body)
