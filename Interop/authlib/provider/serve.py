#!/usr/bin/env python3
"""Run the Authlib interop provider (app.py) in the foreground.

    serve.py STATE_DIR PORT [--host 127.0.0.1]

Binds first (PORT 0 picks a free port), then builds the Flask app for http://HOST:PORT and
serves it with Werkzeug's threaded server (requests, and Authlib's client-authentication
failures, logged to stderr). Prints exactly one line "ready http://HOST:PORT" on stdout
(flushed) once the socket is listening; the port is also written to STATE_DIR/port. Everything
else is in memory: a restart starts with no tokens and no registered keys.
"""

import argparse
import logging
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# ../../common/interop.py: standard library only, nothing run on import.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "common"))
sys.path.insert(0, HERE)
import interop  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("state_dir")
    ap.add_argument("port", type=int)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args()

    state_dir = os.path.abspath(args.state_dir)
    os.makedirs(state_dir, exist_ok=True)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="authlib: %(levelname)s %(name)s: %(message)s")
    # Why Authlib refused a client (a bad assertion, a wrong method) is logged at debug level.
    for name in ("authlib.oauth2.rfc7523", "authlib.oauth2.rfc6749.authenticate_client"):
        logging.getLogger(name).setLevel(logging.DEBUG)

    import werkzeug.serving
    from werkzeug.serving import make_server

    from app import create_app

    werkzeug.serving._log_add_style = False  # the log is a file: no terminal colours in it

    ipv6 = ":" in args.host
    # Bound before the app exists: the issuer and endpoint URLs carry the port.
    httpd = make_server(args.host, args.port, app=None, threaded=True)
    host_in_url = f"[{args.host}]" if ipv6 else args.host
    base_url = f"http://{host_in_url}:{httpd.server_address[1]}"
    httpd.app = create_app(base_url)
    interop.serve_announced(httpd, base_url, port_file=os.path.join(state_dir, "port"),
                            note=f"authlib: serving {base_url} (state {state_dir})")


if __name__ == "__main__":
    main()
