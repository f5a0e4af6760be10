#!/usr/bin/env bash
# Start the Authlib interop provider in the foreground.
#
#   Interop/authlib/serve.sh STATE_DIR PORT        (PORT 0 = pick a free port)
#
# Ensures the venv ($AUTHLIB_VENV, default ~/.cache/cv-interop-authlib/venv-<req hash>)
# via setup.sh, then execs provider/serve.py: serve on 127.0.0.1:PORT (threaded). Prints
# "ready http://127.0.0.1:PORT" on stdout once listening (also the issuer); request log
# goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
state="${1:?usage: serve.sh STATE_DIR PORT}"
port="${2:?usage: serve.sh STATE_DIR PORT}"
venv="$("$here/venv-path.sh")"
"$here/setup.sh" "$venv" >&2
exec "$venv/bin/python" -u "$here/provider/serve.py" "$state" "$port" ${AUTHLIB_HOST:+--host "$AUTHLIB_HOST"}
