#!/usr/bin/env bash
# Installs the MTProto test client, Telethon 1.45 from PyPI (unmodified), into a venv cached
# outside the clone. Prints the venv's python on stdout. Running it again is a no-op.
#
# Usage: scripts/install-telethon.sh        (OXIGRAM_TELETHON_VENV overrides the venv folder)
set -euo pipefail

venv="${OXIGRAM_TELETHON_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/oxigram/telethon-1.45-venv}"
log() { printf 'oxigram: %s\n' "$*" >&2; }

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c 'import telethon, sys; sys.exit(telethon.__version__ != "1.45.0")' 2>/dev/null; then
    echo "$venv/bin/python"
    exit 0
fi

python=$(command -v python3 || true)
if [[ -z "$python" ]]; then
    log "python3 not found: install it (Debian: python3 python3-venv)"
    exit 1
fi
log "installing Telethon 1.45.0 into $venv…"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "telethon==1.45.0" >&2
echo "$venv/bin/python"
