"""A real headless Chromium (Debian's ``/usr/bin/chromium``) driven over the DevTools protocol.

Only what the example tests need: open a page, evaluate JavaScript, wait for a condition, take a
screenshot. The browser is never downloaded: scripts/test installs Debian's package.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import select
import shutil
import subprocess
import time
import urllib.request
from types import TracebackType
from typing import Any

import websocket
from asyncinotify import Inotify, Mask

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",  # the browser picks a free port and writes it to DevToolsActivePort
    "--window-size=1000,800",
]


class Chromium:
    """``with Chromium(profile_dir) as browser: browser.open(url); browser.wait_for("js expr")``."""

    def __init__(self, user_data_dir: str | os.PathLike[str]) -> None:
        self.user_data_dir = os.fspath(user_data_dir)
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: websocket.WebSocket | None = None
        self._ids = itertools.count(1)
        self._events: list[str] = []  # methods of the DevTools events seen while waiting for replies

    def __enter__(self) -> Chromium:
        executable = shutil.which("chromium") or "/usr/bin/chromium"
        os.makedirs(self.user_data_dir, exist_ok=True)
        # Watched before the browser starts, so its DevToolsActivePort cannot appear unseen.
        watch = Inotify()
        watch.add_watch(self.user_data_dir, Mask.CLOSE_WRITE | Mask.MOVED_TO)
        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.user_data_dir}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with watch:
                port = self._wait_for_port(watch)
            # The socket's timeout outlasts wait_for's, which the page itself enforces.
            self._socket = websocket.create_connection(self._page_socket_url(port), timeout=60, suppress_origin=True)
            self.call("Page.enable")
            self.call("Runtime.enable")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _wait_for_port(self, watch: Inotify, timeout_s: float = 30.0) -> int:
        """The port in DevToolsActivePort, read each time a file of the profile is written (inotify),
        until the browser has written it; fails at once if the browser exits."""
        assert self._process is not None
        marker = os.path.join(self.user_data_dir, "DevToolsActivePort")
        deadline = time.monotonic() + timeout_s
        pidfd = os.pidfd_open(self._process.pid)
        try:
            while True:
                try:
                    with open(marker) as file:
                        first_line = file.readline().strip()
                    if first_line:
                        return int(first_line)
                except FileNotFoundError:
                    pass
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"chromium wrote no {marker} within {timeout_s} s")
                ready, _, _ = select.select([watch.fd, pidfd], [], [], remaining)
                if pidfd in ready:
                    self._process.wait()
                    raise RuntimeError(f"chromium exited with {self._process.returncode} before it listened")
                if watch.fd in ready:
                    os.read(watch.fd, 65536)  # which file changed does not matter: the marker is read again
        finally:
            os.close(pidfd)

    @staticmethod
    def _page_socket_url(port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            targets = json.load(answer)
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            raise RuntimeError(f"chromium shows no page target: {targets}")
        return str(pages[0]["webSocketDebuggerUrl"])

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events that arrive meanwhile are skipped)."""
        assert self._socket is not None, "the browser is not open"
        request_id = next(self._ids)
        self._socket.send(json.dumps({"id": request_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self._socket.recv())
            if reply.get("id") == request_id:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply["method"])

    def _wait_for_event(self, method: str) -> None:
        """Until the browser sends the event ``method`` (also if it came while waiting for a reply)."""
        assert self._socket is not None, "the browser is not open"
        while method not in self._events:
            self._events.append(json.loads(self._socket.recv()).get("method", ""))
        self._events.clear()

    def open(self, url: str) -> None:
        """Navigate and wait until the document has loaded (the page's load event)."""
        self._events.clear()
        self.call("Page.navigate", url=url)
        self._wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 15.0) -> Any:
        """Wait until ``expression`` is truthy (and return it), or fail after ``timeout_s``.

        The page itself waits: it evaluates the expression again on every change of the document
        (a MutationObserver), and the call returns when its promise settles.
        """
        waiting = f"""new Promise((resolve, reject) => {{
            const test = () => {{
                const value = ({expression});
                if (value) {{ observer.disconnect(); clearTimeout(timer); resolve(value); }}
            }};
            const observer = new MutationObserver(test);
            observer.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
            const timer = setTimeout(() => {{
                observer.disconnect();
                reject(new Error("still " + JSON.stringify({expression}) + " after {timeout_s} s"));
            }}, {timeout_s * 1000});
            test();
        }})"""
        return self.evaluate(waiting)

    def screenshot(self, path: str | os.PathLike[str]) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(data))

    def close(self) -> None:
        """Close the connection and end the browser; closing twice is harmless."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None
