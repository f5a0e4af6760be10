#!/usr/bin/env bash
# Create (or reuse) the Python venv for the credential-helper interop suite (the docker SDK).
#
#   Interop/helpers/setup.sh VENV_DIR
#
# Like ../dot/setup.sh (both are ../common/venv-setup.sh): installs the Debian packages it needs
# (python3, python3-venv, git) when missing, then pip-installs the pinned requirements.txt.
# Idempotent: a venv whose stamp matches the current requirements.txt (and whose packages
# import) is reused untouched.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${1:?usage: setup.sh VENV_DIR}"
# Debian's git: the client under test and, through git-http-backend, the server side.
exec "$here/../common/venv-setup.sh" helpers "$venv" "$here/requirements.txt" \
    'import docker.credentials, requests' git
