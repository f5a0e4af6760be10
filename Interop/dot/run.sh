#!/usr/bin/env bash
# The django-oauth-toolkit conformance suite: `make interop` (part of `make test`).
#
#   Interop/dot/run.sh VAULT_BINARY
#
# Sets up the pinned provider in a venv (setup.sh), starts it on a free loopback port with a
# fresh state directory, runs suite.py against it with the given `vault`, stops it. The
# provider's request log is kept in the work directory and printed when a case fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vault="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
venv="$("$here/venv-path.sh")"
export DOT_VENV="$venv"
"$here/setup.sh" "$venv"

work="$(mktemp -d /tmp/cv-interop.XXXXXX)"
chmod 700 "$work"
provider_pid=""
cleanup() {
    if [ -n "$provider_pid" ]; then
        kill "$provider_pid" 2>/dev/null || true
        wait "$provider_pid" 2>/dev/null || true
    fi
    # Browsers this run started are detached (setsid): end those still running, and no other.
    if [ -f "$work/browsers" ]; then
        while read -r pid; do kill -- "-$pid" 2>/dev/null || true; done <"$work/browsers"
    fi
    rm -rf "$work"
}
trap cleanup EXIT

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
echo "django-oauth-toolkit $("$venv/bin/python" -c 'import oauth2_provider; print(oauth2_provider.__version__)') at $origin"

mkdir -p "$work/suite"
export DOT_BROWSER_PIDS="$work/browsers"
# The provider, its browser and the vault talk over loopback only: never through a proxy CI may set.
export NO_PROXY="127.0.0.1,localhost,::1" no_proxy="127.0.0.1,localhost,::1"
if ! "$venv/bin/python" -u "$here/suite.py" "$vault" "$origin/o" "$work/suite"; then
    echo "--- provider log (last 80 lines)"; tail -n 80 "$work/provider/log"
    for log in "$work"/suite/*/browser.log; do [ -f "$log" ] && { echo "--- $log"; tail -n 40 "$log"; }; done
    exit 1
fi
