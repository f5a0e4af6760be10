#!/usr/bin/env bash
# Create (or reuse) the Python venv for the credential-helper interop suite (the docker SDK).
#
#   Interop/helpers/setup.sh VENV_DIR
#
# Mirrors ../dot/setup.sh: installs the Debian packages it needs (python3, python3-venv, git)
# when missing, then pip-installs the pinned requirements.txt. Idempotent: a venv whose stamp
# matches the current requirements.txt (and whose packages import) is reused untouched.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${1:?usage: setup.sh VENV_DIR}"
req="$here/requirements.txt"

log() { echo "helpers-setup: $*" >&2; }

apt_install() {
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    log "installing Debian packages: $*"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Use Debian's interpreter (the one CI has), not a pyenv shim that may shadow it.
if [ ! -x /usr/bin/python3 ]; then
    apt_install python3
fi
py=/usr/bin/python3
if ! dpkg -s python3-venv >/dev/null 2>&1; then
    apt_install python3-venv
fi
# Debian's git: the client under test and, through git-http-backend, the server side.
if [ ! -x /usr/bin/git ] || [ ! -x /usr/lib/git-core/git-http-backend ]; then
    apt_install git
fi

req_hash="$(sha256sum "$req" | cut -d' ' -f1)"
stamp="$venv/.cv-helpers-requirements.sha256"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$req_hash" ] \
    && "$venv/bin/python" -c 'import docker.credentials, requests' >/dev/null 2>&1; then
    exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
    log "creating venv $venv"
    mkdir -p "$(dirname "$venv")"
    "$py" -m venv "$venv"
fi
log "installing pinned requirements into $venv"
"$venv/bin/python" -m pip install --disable-pip-version-check -q --no-input -r "$req"
"$venv/bin/python" -c 'import docker.credentials, requests'
echo "$req_hash" > "$stamp"
log "venv ready: $venv"
