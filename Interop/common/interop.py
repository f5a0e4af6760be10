"""What the interop suites (../dot, ../authlib, ../helpers) share: their list of cases, a device
sign-in driven to its end, and a loopback server's "ready" announcement.

Standard library only: scripts run by different interpreters import it (DOT's venv python,
the Authlib and helpers venv pythons, Debian's /usr/bin/python3), each after putting this
directory on sys.path relative to its own location. Importing it has no side effects beyond
the standard modules it imports.
"""

import queue
import re
import subprocess
import sys
import threading
import time


class Cases(list):
    """A suite's cases, (title, function) in the order they are defined: `@CASES.case(title)`."""

    def case(self, title):
        def register(function):
            self.append((title, function))
            return function
        return register


def device_sign_in(command, env, browser, user, seconds, browser_env, failure=RuntimeError, brief=str):
    """Run `vault login --device ...` (command, with env) as a child; the user approves the code
    it shows with the scripted browser (browser: the argv that runs ../dot/browser.py, given
    `device URI CODE --user USER`, with browser_env). The child's standard error and output are
    read on threads (a line that never comes cannot block the caller), and the child is ended
    whatever happens. Each step is bounded by seconds. Returns (stdout, stderr) of a child that
    exited 0; raises failure(message) otherwise, with the child's stderr passed through brief."""
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
    lines = queue.Queue()
    err_lines = []
    out_chunks = []

    def pump(stream, sink, into_queue):
        for line in stream:
            sink.append(line)
            if into_queue:
                lines.put(line)
    readers = [threading.Thread(target=pump, args=(child.stderr, err_lines, True), daemon=True),
               threading.Thread(target=pump, args=(child.stdout, out_chunks, False), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + seconds
        uri = code = None
        while time.monotonic() < deadline and not (uri and code):
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            uri = uri or (re.search(r"To sign in, open (\S+)", line) or [None, None])[1]
            code = code or (re.search(r"enter the code: (\S+)", line) or [None, None])[1]
        if not (uri and code):
            raise failure(f"vault login --device showed no code: {brief(''.join(err_lines))}")
        approved = subprocess.run([*browser, "device", uri, code, "--user", user],
                                  capture_output=True, text=True, timeout=seconds, env=browser_env)
        if approved.returncode != 0:
            raise failure(f"the browser could not approve the code: {approved.stderr[-800:]}")
        child.wait(timeout=seconds)
        for reader in readers:
            reader.join(timeout=10)
        if child.returncode != 0:
            raise failure(f"vault login --device exited {child.returncode}: {brief(''.join(err_lines))}")
        return "".join(out_chunks), "".join(err_lines)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def serve_announced(httpd, url, port_file=None, note=None):
    """Serve httpd (already listening) in the foreground until interrupted. First writes its
    port to port_file (when given), prints exactly one line "ready URL" on stdout (flushed: the
    run.sh scripts wait for it), and note on stderr (when given). Ctrl-C ends it quietly; the
    socket is closed whatever happens."""
    if port_file:
        with open(port_file, "w") as f:
            f.write(f"{httpd.server_address[1]}\n")
    print(f"ready {url}", flush=True)
    if note:
        print(note, file=sys.stderr, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
