"""Headless Chromium for the HTML page tests, driven over the DevTools protocol through a pipe
(``--remote-debugging-pipe``: NUL-separated JSON on the child's fds 3 and 4), so no WebSocket client,
driver binary or browser download is needed — only the system's ``chromium`` (Debian's package;
``.ci/run`` installs it when missing).

``Browser.open(path)`` loads a file and returns the console errors and uncaught exceptions seen while
it loaded; ``evaluate`` runs JavaScript in it; ``screenshot`` writes a PNG.
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe")
READ_FD, WRITE_FD = 3, 4          # the child reads commands on fd 3 and writes answers on fd 4
VIEWPORT = (1400, 1000)


def chromium_or_skip() -> str:
    """The Chromium binary ($KAFKALOG_CHROMIUM, else the first of CHROMIUM_NAMES on PATH), or skip."""
    path = os.environ.get("KAFKALOG_CHROMIUM") or next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    if not path:
        pytest.skip("headless Chromium not found (apt-get install chromium; .ci/run installs it when it can; "
                    "KAFKALOG_CHROMIUM names another binary)")
    return path


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page. Use as a context manager."""

    def __init__(self, binary: str, *, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="kafkalog-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # the child's fds 3 and 4 must be exactly these pipes: hold them above 4 (close-on-exec) so that
        # dup2 in the child cannot clobber one with the other; dup2 makes the copies inheritable
        child_r, child_w = _above(to_child_r), _above(from_child_w)

        def child_fds():
            os.dup2(child_r, READ_FD)
            os.dup2(child_w, WRITE_FD)

        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
             "about:blank"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            close_fds=False, preexec_fn=child_fds)
        os.close(child_r)
        os.close(child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list = []
        self.session: Optional[str] = None

    # --- protocol --------------------------------------------------------------------------------

    def send(self, method: str, params: Optional[dict] = None, *, session: bool = True) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_event(self, method: str) -> dict:
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        while True:
            event = self._read()
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _read(self) -> dict:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise BrowserError(f"no answer from Chromium within {self.timeout_s} s")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                err = self.process.stderr.read().decode(errors="replace")[-2000:] if self.process.stderr else ""
                raise BrowserError(f"Chromium closed the pipe (exit {self.process.poll()}): {err}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    # --- a page ----------------------------------------------------------------------------------

    def __enter__(self) -> "Browser":
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", {"width": VIEWPORT[0], "height": VIEWPORT[1],
                                                          "deviceScaleFactor": 1, "mobile": False})
        return self

    def open(self, path: os.PathLike | str) -> list[str]:
        """Load the file; return the console errors and uncaught exceptions seen while loading."""
        self.events.clear()
        self.send("Page.navigate", {"url": Path(path).resolve().as_uri()})
        self.wait_event("Page.loadEventFired")
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        return self.errors()

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                d = params.get("exceptionDetails", {})
                out.append(f"exception: {d.get('text')} {d.get('exception', {}).get('description', '')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append("console." + params["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                      for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(f"log: {params['entry'].get('text')} ({params['entry'].get('url', '')})")
        return out

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}…: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: os.PathLike | str, *, full_page: bool = True) -> Path:
        params = {"format": "png"}
        if full_page:
            width, height = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": width, "height": min(height, 16_000), "scale": 1})
        data = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        target = Path(path)
        target.write_bytes(data)
        return target

    def __exit__(self, *exc) -> None:
        try:
            self.send("Browser.close", session=False)
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.process.stderr:
            self.process.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def _above(fd: int) -> int:
    """A close-on-exec copy of ``fd`` numbered above WRITE_FD (``fd`` closed)."""
    import fcntl

    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, WRITE_FD + 1)
    os.close(fd)
    return new
