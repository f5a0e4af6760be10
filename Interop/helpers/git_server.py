#!/usr/bin/env python3
"""A git smart-HTTP server on loopback whose passwords are django-oauth-toolkit access tokens.

    git_server.py STATE_DIR PORT --userinfo URL        (PORT 0 = pick a free port)

Serves the bare repositories under STATE_DIR/root through Debian's `git http-backend` as CGI
(GIT_PROJECT_ROOT=STATE_DIR/root, GIT_HTTP_EXPORT_ALL, REMOTE_USER = the authenticated user, which also
enables push). Every request needs HTTP Basic auth whose password is an access token DOT says
is active: the server asks DOT's userinfo endpoint (URL) with the token as Bearer on every
request (no cache, so a token revoked at DOT is refused at once), and the Basic user name must
be the user DOT names for the token (preferred_username, or sub). DOT's introspection endpoint
would need a confidential client or a token with the "introspection" scope, neither of which
the provider provisions. Anything else: 401 with `WWW-Authenticate: Basic realm="git"`.

STATE_DIR/refused (optional, read on every request) lists token fingerprints, one a line, that
the server refuses as if they were revoked, whatever DOT says: a token the server no longer
takes while the identity provider still could refresh its grant. (Revoking the access token at
DOT itself does not give that: DOT 3.4.1 then refuses its refresh token too, as an orphan.)

Each request is logged to STATE_DIR/requests.jsonl as one JSON line: method, path, user (the Basic user name),
dot_user (whom DOT names for the token), token (the first 12 hex digits of the token's
SHA-256, never the token), status, outcome. Prints "ready http://127.0.0.1:PORT" on stdout
once listening. Standard library only.
"""

import argparse
import base64
import binascii
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "common"))
import interop  # noqa: E402  (../common/interop.py, standard library only)

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
# Loopback only: never a proxy from the environment.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fingerprint(token):
    return hashlib.sha256(token.encode()).hexdigest()[:12] if token else None


def ask_dot(userinfo_url, token):
    """(status, claims or None) from DOT's userinfo endpoint for this access token."""
    request = urllib.request.Request(userinfo_url, headers={"Authorization": "Bearer " + token})
    try:
        with OPENER.open(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, None


class Handler(BaseHTTPRequestHandler):
    server_version = "cv-interop-git/1"

    def log_message(self, format, *args):  # the JSON log below replaces http.server's
        pass

    def do_GET(self):
        self.handle_git()

    def do_POST(self):
        self.handle_git()

    def record(self, **entry):
        entry = {"time": round(time.time(), 3), "method": self.command, "path": self.path, **entry}
        line = json.dumps(entry, sort_keys=True)
        with self.server.log_lock, open(self.server.log_path, "a") as log:
            log.write(line + "\n")
        print("git-server: " + line, file=sys.stderr, flush=True)

    def refuse(self, user, token, outcome, dot_user=None):
        body = b"authentication required\n"
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.record(user=user, dot_user=dot_user, token=fingerprint(token), status=401, outcome=outcome)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def handle_git(self):
        body = self.read_body()  # before any answer, so the connection stays in step
        header = self.headers.get("Authorization", "")
        if not header.lower().startswith("basic "):
            return self.refuse(None, None, "no credentials")
        try:
            user, _, token = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return self.refuse(None, None, "malformed Basic credentials")
        if not token:
            return self.refuse(user, None, "no password")
        if fingerprint(token) in self.server.refused():
            return self.refuse(user, token, "token refused by the server (refused file)")
        try:
            status, claims = ask_dot(self.server.userinfo_url, token)
        except (OSError, ValueError) as error:
            return self.refuse(user, token, f"DOT did not answer: {error}")
        if status != 200 or not claims:
            return self.refuse(user, token, f"DOT refused the token (userinfo {status})")
        names = {claims.get("preferred_username"), str(claims.get("sub"))} - {None, ""}
        dot_user = claims.get("preferred_username") or claims.get("sub")
        if user not in names:
            return self.refuse(user, token, f"user {user!r} is not the token's ({sorted(names)})", dot_user)
        self.run_backend(user, token, dot_user, body)

    def run_backend(self, user, token, dot_user, body):
        split = urlsplit(self.path)
        env = {
            "PATH": "/usr/bin:/bin",
            "GIT_PROJECT_ROOT": self.server.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": self.server.root,
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": self.request_version,
            "SERVER_SOFTWARE": self.server_version,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": str(self.server.server_address[1]),
            "REQUEST_METHOD": self.command,
            "PATH_INFO": split.path,
            "QUERY_STRING": split.query,
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_USER": user,
            "AUTH_TYPE": "Basic",
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        for name in ("Git-Protocol", "Content-Encoding", "Accept", "User-Agent"):
            if name in self.headers:
                env["HTTP_" + name.upper().replace("-", "_")] = self.headers[name]
        done = subprocess.run([HTTP_BACKEND], input=body, env=env, capture_output=True, timeout=120)
        head, sep, payload = done.stdout.partition(b"\r\n\r\n")
        if not sep:
            head, sep, payload = done.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        if done.returncode != 0 and not sep:
            status, headers, payload = 500, [("Content-Type", "text/plain")], done.stderr
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        outcome = "served" if status < 400 else "backend error"
        if done.stderr:
            outcome += ": " + done.stderr.decode(errors="replace").strip()[-300:]
        self.record(user=user, dot_user=dot_user, token=fingerprint(token), status=status, outcome=outcome)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("state_dir")
    ap.add_argument("port", type=int)
    ap.add_argument("--userinfo", required=True, help="DOT's userinfo endpoint")
    args = ap.parse_args()
    state = os.path.abspath(args.state_dir)
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    httpd.daemon_threads = True
    httpd.root = os.path.join(state, "root")
    httpd.userinfo_url = args.userinfo
    httpd.log_path = os.path.join(state, "requests.jsonl")
    httpd.log_lock = threading.Lock()
    refused_path = os.path.join(state, "refused")

    def refused():
        try:
            with open(refused_path) as listed:
                return {line.strip() for line in listed if line.strip()}
        except FileNotFoundError:
            return set()
    httpd.refused = refused
    os.makedirs(httpd.root, exist_ok=True)
    interop.serve_announced(httpd, f"http://127.0.0.1:{httpd.server_address[1]}")


if __name__ == "__main__":
    main()
