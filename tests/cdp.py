"""A headless chromium driven over the DevTools protocol, for tests that load a real page.

    with Chromium(tmp_path) as browser:
        page = browser.page()
        page.navigate("http://127.0.0.1:8265/")
        page.wait_for("document.querySelectorAll('#actors tr[data-actor-id]').length == 1")
        page.screenshot(tmp_path / "page.png", 1280, 900)

Debian's ``chromium`` package (``apt-get install chromium``; ``.ci/run`` installs it). The
DevTools websocket is spoken with a small client on the standard library (text frames, masked
as a client must, pings answered), so the tests need no browser-automation package. The browser
runs in its own process group and is stopped by its PID (SIGTERM, then SIGKILL to the group it
leads, which holds its renderer and helper processes).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def chromium_path() -> str | None:
    """The chromium binary, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class WebSocket:
    """A client websocket (RFC 6455) over one TCP connection: text messages only."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        assert parts.scheme == "ws" and parts.hostname and parts.port, url
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"websocket handshake with {url}: connection closed")
            head += chunk
        head, _, self._buffer = head.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError(f"websocket handshake with {url} refused: {head.decode(errors='replace')}")
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        if f"sec-websocket-accept: {accept}".lower() not in head.decode().lower():
            raise ConnectionError(f"websocket handshake with {url}: wrong Sec-WebSocket-Accept")

    def _read(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buffer)))
            if not chunk:
                raise ConnectionError("websocket closed by the browser")
            self._buffer += chunk
        data, self._buffer = self._buffer[:n], self._buffer[n:]
        return data

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        head = bytearray([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head.append(0x80 | n)
        elif n < 2**16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        head += mask
        self.sock.sendall(bytes(head) + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send(self, text: str) -> None:
        self._send_frame(0x1, text.encode())

    def recv(self) -> str:
        """The next text message (fragments joined); pings are answered on the way."""
        parts: list[bytes] = []
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._read(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._read(8))
            mask = self._read(4) if b1 & 0x80 else b""
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):
                parts.append(payload)
                if b0 & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class Page:
    """One browser tab, through its DevTools websocket."""

    def __init__(self, ws_url: str) -> None:
        self.ws = WebSocket(ws_url)
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events meanwhile are skipped)."""
        call_id = next(self._ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") != call_id:
                continue
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            result: dict[str, Any] = message.get("result", {})
            return result

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able values only)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0) -> Any:
        """Poll ``expression`` until it is truthy; its last value, or AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError:  # the page is still loading: its elements are not there yet
                value = None
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"not true within {timeout:g}s: {expression} (last value {value!r})")

    def screenshot(self, path: Path, width: int, height: int) -> Path:
        """A PNG of the page at ``width`` x ``height`` CSS pixels."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.ws.close()


class Chromium:
    """A headless chromium with its DevTools endpoint on a free loopback port."""

    def __init__(self, profile: Path, timeout: float = 30.0) -> None:
        binary = chromium_path()
        if binary is None:
            raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
        profile.mkdir(parents=True, exist_ok=True)
        # Its singleton socket's folder (org.chromium.Chromium.*, under TMPDIR), which it leaves
        # when killed: in a short-named folder of ours (the socket's path must fit 107 bytes).
        self.tmp = tempfile.mkdtemp(prefix="cdp-")
        self.log = open(profile / "chromium.log", "wb")  # closed in close()
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",  # the tests may run as root, where chromium's sandbox refuses to start
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, TMPDIR=self.tmp),
        )
        self.pages: list[Page] = []
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"chromium did not start: see {profile / 'chromium.log'}")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])

    def page(self) -> Page:
        """The browser's first tab."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as r:
            targets = json.loads(r.read())
        target = next(t for t in targets if t.get("type") == "page")
        page = Page(target["webSocketDebuggerUrl"])
        self.pages.append(page)
        return page

    def close(self) -> None:
        for page in self.pages:
            page.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:  # its helpers (renderer, zygote) are in the group it led
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
