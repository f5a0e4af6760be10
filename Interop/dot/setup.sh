#!/usr/bin/env bash
# Create (or reuse) the Python venv for the django-oauth-toolkit interop provider.
#
#   Interop/dot/setup.sh VENV_DIR
#
# Installs the Debian packages it needs (python3, python3-venv) when missing, then
# pip-installs the pinned requirements.txt. Idempotent: a venv whose stamp matches
# the current requirements.txt (and whose packages import) is reused untouched.
# The work is ../common/venv-setup.sh's (shared with ../helpers/setup.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${1:?usage: setup.sh VENV_DIR}"
exec "$here/../common/venv-setup.sh" dot "$venv" "$here/requirements.txt" \
    'import django, oauth2_provider, requests, cryptography'
