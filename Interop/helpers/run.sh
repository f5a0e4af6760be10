#!/usr/bin/env bash
# The credential-helper interop suite: the vault's git and docker credential helpers run by
# real git (Debian's) and the docker SDK for Python, against django-oauth-toolkit.
#
#   Interop/helpers/run.sh VAULT_BINARY
#
# Sets up DOT's venv (../dot/setup.sh) and this suite's own (setup.sh: the docker SDK), starts
# DOT (../dot/serve.sh) and git_server.py on free loopback ports with fresh state, runs suite.py
# with the given `vault`, stops everything. The provider's and the git server's logs are kept
# in the work directory and printed when a case fails.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dot="$(cd "$here/../dot" && pwd)"
vault="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
dot_venv="$("$dot/venv-path.sh")"
export DOT_VENV="$dot_venv"
"$dot/setup.sh" "$dot_venv"
venv="$("$here/venv-path.sh")"
"$here/setup.sh" "$venv"

work="$(mktemp -d /tmp/cv-interop-helpers.XXXXXX)"
chmod 700 "$work"
provider_pid="" git_server_pid="" suite_pid=""
stop() {  # a pid this script started, and its children where it leads a process group
    [ -n "$1" ] || return 0
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
cleanup() {
    # The suite runs in a session of its own (no terminal to prompt on): end that session's
    # process group (git, helpers it may have left), then the servers.
    if [ -n "$suite_pid" ]; then kill -- "-$suite_pid" 2>/dev/null || true; wait "$suite_pid" 2>/dev/null || true; fi
    stop "$git_server_pid"
    stop "$provider_pid"
    if [ -f "$work/browsers" ]; then
        while read -r pid; do kill -- "-$pid" 2>/dev/null || true; done <"$work/browsers"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_ready() {  # FILE PID NAME LOG: the "ready URL" line FILE gets, or the log and exit 1
    for _ in $(seq 1 600); do
        grep -q '^ready ' "$1" 2>/dev/null && { sed -n 's/^ready //p' "$1"; return 0; }
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    cat "$4" >&2; echo "$3 did not start" >&2; return 1
}

# The provider, its browser, git, the git server and the vault talk over loopback only:
# never through a proxy CI may set.
export NO_PROXY="127.0.0.1,localhost,::1" no_proxy="127.0.0.1,localhost,::1"

mkdir -p "$work/provider"
"$dot/serve.sh" "$work/provider" 0 > "$work/provider/ready" 2> "$work/provider/log" &
provider_pid=$!
origin="$(wait_ready "$work/provider/ready" "$provider_pid" "the provider" "$work/provider/log")"

mkdir -p "$work/git-server"
/usr/bin/python3 -u "$here/git_server.py" "$work/git-server" 0 --userinfo "$origin/o/userinfo/" \
    > "$work/git-server/ready" 2> "$work/git-server/log" &
git_server_pid=$!
git_origin="$(wait_ready "$work/git-server/ready" "$git_server_pid" "the git server" "$work/git-server/log")"

echo "django-oauth-toolkit $("$dot_venv/bin/python" -c 'import oauth2_provider; print(oauth2_provider.__version__)') at $origin"
echo "$(git --version) (git-http-backend at $git_origin); docker SDK for Python $("$venv/bin/python" -c 'import docker; print(docker.__version__)')"

mkdir -p "$work/suite"
export DOT_BROWSER_PIDS="$work/browsers"
status=0
setsid "$venv/bin/python" -u "$here/suite.py" "$vault" "$origin/o" "$git_origin" "$work/git-server" "$work/suite" \
    </dev/null &
suite_pid=$!
wait "$suite_pid" || status=$?
suite_pid=""
if [ "$status" != 0 ]; then
    echo "--- provider log (last 60 lines)"; tail -n 60 "$work/provider/log"
    echo "--- git server requests (last 60)"; tail -n 60 "$work/git-server/requests.jsonl" 2>/dev/null || true
    echo "--- git server log (last 20 lines)"; grep -v '^git-server: {' "$work/git-server/log" | tail -n 20 || true
    for log in "$work"/suite/*/browser.log; do [ -f "$log" ] && { echo "--- $log"; tail -n 30 "$log"; }; done
    exit 1
fi
