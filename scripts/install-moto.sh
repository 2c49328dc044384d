#!/usr/bin/env bash
# Installs the S3-compatible server the media tests run the S3 blob path against: moto 5.2.1
# from PyPI in server mode (`moto[server]`), into a venv cached outside the clone. Prints the
# server binary's path on stdout. Running it again is a no-op.
#
# Usage: scripts/install-moto.sh        (OXIGRAM_MOTO_VENV overrides the venv folder)
set -euo pipefail

venv="${OXIGRAM_MOTO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/oxigram/moto-venv}"
log() { printf 'oxigram: %s\n' "$*" >&2; }

if [[ -x "$venv/bin/moto_server" ]] && "$venv/bin/python" -c 'import moto, sys; sys.exit(moto.__version__ != "5.2.1")' 2>/dev/null; then
    echo "$venv/bin/moto_server"
    exit 0
fi

python=$(command -v python3 || true)
if [[ -z "$python" ]]; then
    log "python3 not found: install it (Debian: python3 python3-venv)"
    exit 1
fi
log "installing moto[server] 5.2.1 into $venv…"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "moto[server]==5.2.1" >&2
echo "$venv/bin/moto_server"
