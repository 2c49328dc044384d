#!/usr/bin/env bash
# Installs the PostgreSQL server and Redis from Debian's packages, for CI and
# for machines where `oxigram up` cannot install them itself (it needs root).
# Only what is missing gets installed; running it again is a no-op.
#
# Usage: sudo scripts/install-infra.sh
#
# Debian's postgresql package creates and starts a system cluster on port
# 5432, and redis-server may start a system Redis on 6379; both are harmless:
# oxigram runs its own private servers (ports 55432 and 56379 by default)
# under its data folder (see tools/devinfra).
set -euo pipefail

log() { printf 'oxigram: %s\n' "$*" >&2; }

# A usable PostgreSQL server: Debian's /usr/lib/postgresql/<ver>/bin with
# initdb, pg_ctl and postgres.
have_postgres() {
    local bin
    for bin in /usr/lib/postgresql/*/bin; do
        if [[ -x "$bin/initdb" && -x "$bin/pg_ctl" && -x "$bin/postgres" ]]; then
            return 0
        fi
    done
    return 1
}

have_redis() {
    [[ -x /usr/bin/redis-server ]] || command -v redis-server >/dev/null 2>&1
}

packages=()
have_postgres || packages+=(postgresql)
have_redis || packages+=(redis-server)

if ((${#packages[@]} == 0)); then
    log "PostgreSQL and Redis are already installed"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    log "apt-get not found: install ${packages[*]} with your system's package manager"
    exit 1
fi

sudo=()
if [[ "$(id -u)" != 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo=(sudo)
    else
        log "installing ${packages[*]} needs root: run this script as root"
        exit 1
    fi
fi

log "installing ${packages[*]} from Debian's packages…"
"${sudo[@]}" apt-get -q -o DPkg::Lock::Timeout=300 update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get -q -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${packages[@]}"

if ! have_postgres || ! have_redis; then
    log "installation finished, but the programs are still missing; see the apt output above"
    exit 1
fi
log "PostgreSQL and Redis installed"
