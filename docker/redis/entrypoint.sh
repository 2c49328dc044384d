#!/bin/sh
# Entrypoint of oxigram-redis, after the official redis image's: arguments that start with
# `-` (or a *.conf file) are redis-server's, and redis-server runs as user redis, in the
# foreground, logging to stdout.
#
# Without a config file redis-server would start in protected mode (refusing every client but
# loopback); the default CMD turns it off, and so does this script when it prepends
# redis-server to bare options (`docker run oxigram-redis:local --requirepass x`).
set -e

case "$1" in
-*) set -- redis-server --bind 0.0.0.0 --protected-mode no --save '' --appendonly no "$@" ;;
*.conf) set -- redis-server "$@" ;;
esac

if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
    find . \! -user redis -exec chown redis '{}' +
    # setpriv execs redis-server (it stays PID 1 and gets docker stop's SIGTERM), like gosu.
    HOME=/data exec setpriv --reuid=redis --regid=redis --init-groups -- "$0" "$@"
fi

exec "$@"
