#!/usr/bin/env bash
# Print the venv directory used by serve.sh and run.sh:
# $AUTHLIB_VENV if set, else a per-requirements cache dir shared by all clones.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -n "${AUTHLIB_VENV:-}" ]; then echo "$AUTHLIB_VENV"; exit 0; fi
h="$(sha256sum "$here/requirements.txt" | cut -c1-12)"
echo "${XDG_CACHE_HOME:-$HOME/.cache}/cv-interop-authlib/venv-$h"
