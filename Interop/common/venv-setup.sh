#!/usr/bin/env bash
# Create (or reuse) an interop suite's Python venv: shared by ../dot/setup.sh, ../authlib/setup.sh
# and ../helpers/setup.sh.
#
#   Interop/common/venv-setup.sh NAME VENV REQUIREMENTS_FILE IMPORT_CHECK [APT_PACKAGE...]
#
# NAME        the suite: messages say "NAME-setup: ...", the stamp is VENV/.cv-NAME-requirements.sha256
# IMPORT_CHECK  Python code that must run in the venv, e.g. 'import django, requests'
# APT_PACKAGE Debian packages the suite needs besides python3 and python3-venv
#
# Installs the Debian packages that are missing (Debian's python3, python3-venv, the
# APT_PACKAGEs), then pip-installs the pinned REQUIREMENTS_FILE. Idempotent: a venv whose stamp
# matches the current REQUIREMENTS_FILE (and where IMPORT_CHECK runs) is reused untouched.
set -euo pipefail

usage="usage: venv-setup.sh NAME VENV REQUIREMENTS_FILE IMPORT_CHECK [APT_PACKAGE...]"
name="${1:?$usage}"
venv="${2:?$usage}"
req="${3:?$usage}"
import_check="${4:?$usage}"
shift 4

log() { echo "$name-setup: $*" >&2; }

apt_install() {
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    log "installing Debian packages: $*"
    $sudo apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }

# Use Debian's interpreter (the one CI has), not a pyenv shim that may shadow it.
missing=()
[ -x /usr/bin/python3 ] || missing+=(python3)
for package in python3-venv "$@"; do
    installed "$package" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
fi
py=/usr/bin/python3

req_hash="$(sha256sum "$req" | cut -d' ' -f1)"
stamp="$venv/.cv-$name-requirements.sha256"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$req_hash" ] \
    && "$venv/bin/python" -c "$import_check" >/dev/null 2>&1; then
    exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
    log "creating venv $venv"
    mkdir -p "$(dirname "$venv")"
    "$py" -m venv "$venv"
fi
log "installing pinned requirements into $venv"
"$venv/bin/python" -m pip install --disable-pip-version-check -q --no-input -r "$req"
"$venv/bin/python" -c "$import_check"
echo "$req_hash" > "$stamp"
log "venv ready: $venv"
