#!/usr/bin/env bash
# The Authlib client-credentials conformance suite.
#
#   Interop/authlib/run.sh VAULT_BINARY
#
# Sets up the pinned provider in a venv (setup.sh), starts it on a free loopback port with a
# fresh state directory, runs suite.py against it with the given `vault`, stops it. The
# provider's request log is kept in the work directory and printed when a case fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vault="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
venv="$("$here/venv-path.sh")"
export AUTHLIB_VENV="$venv"
"$here/setup.sh" "$venv"

work="$(mktemp -d /tmp/cv-interop-authlib.XXXXXX)"
chmod 700 "$work"
provider_pid=""
cleanup() {
    if [ -n "$provider_pid" ]; then
        kill "$provider_pid" 2>/dev/null || true
        wait "$provider_pid" 2>/dev/null || true
    fi
    # Logins the suite left waiting in the background (each leads a process group of its own):
    # end those still running, and no other.
    if [ -f "$work/background" ]; then
        while read -r pid; do kill -- "-$pid" 2>/dev/null || true; done <"$work/background"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/provider"
"$here/serve.sh" "$work/provider" 0 > "$work/provider/ready" 2> "$work/provider/log" &
provider_pid=$!
for _ in $(seq 1 600); do
    grep -q '^ready ' "$work/provider/ready" 2>/dev/null && break
    kill -0 "$provider_pid" 2>/dev/null || { cat "$work/provider/log"; echo "the provider did not start" >&2; exit 1; }
    sleep 0.1
done
origin="$(sed -n 's/^ready //p' "$work/provider/ready")"
[ -n "$origin" ] || { cat "$work/provider/log"; echo "the provider did not become ready" >&2; exit 1; }
echo "Authlib $("$venv/bin/python" -c 'import authlib; print(authlib.__version__)') (Flask $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("flask"))')) at $origin"

mkdir -p "$work/suite"
export AUTHLIB_SUITE_PIDS="$work/background"
# The provider and the vault talk over loopback only: never through a proxy CI may set.
export NO_PROXY="127.0.0.1,localhost,::1" no_proxy="127.0.0.1,localhost,::1"
if ! "$venv/bin/python" -u "$here/suite.py" "$vault" "$origin" "$work/suite"; then
    echo "--- provider log (last 80 lines)"; tail -n 80 "$work/provider/log"
    for log in "$work"/suite/*/background.err; do [ -s "$log" ] && { echo "--- $log"; tail -n 20 "$log"; }; done
    exit 1
fi
