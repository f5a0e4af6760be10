#!/usr/bin/env bash
# Create (or reuse) the Python venv for the Authlib interop provider.
#
#   Interop/authlib/setup.sh VENV_DIR
#
# Like ../dot/setup.sh (both run ../common/venv-setup.sh): installs the Debian packages it needs
# (python3, python3-venv) when missing, then pip-installs the pinned requirements.txt.
# Idempotent: a venv whose stamp matches the current requirements.txt (and whose packages
# import) is reused untouched.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${1:?usage: setup.sh VENV_DIR}"
exec "$here/../common/venv-setup.sh" authlib "$venv" "$here/requirements.txt" \
    'import authlib.integrations.flask_oauth2, authlib.oauth2.rfc7523, flask, cryptography, requests'
