#!/usr/bin/env bash
# Entrypoint of oxigram-postgres: the official postgres image's docker-entrypoint.sh, cut
# down, for Debian's PostgreSQL packages.
#
# Environment (as in the official image):
#   POSTGRES_PASSWORD          superuser password; required unless POSTGRES_HOST_AUTH_METHOD=trust
#   POSTGRES_USER              superuser name (default postgres)
#   POSTGRES_DB                database created on first start (default $POSTGRES_USER)
#   POSTGRES_HOST_AUTH_METHOD  auth of the `host all all all` rule (default scram-sha-256)
#   POSTGRES_INITDB_ARGS       extra initdb arguments
#   (each of the above may also be given as *_FILE: the path of a file holding the value)
#   PGDATA                     /var/lib/postgresql/data
#
# First start (no $PGDATA/PG_VERSION): initdb as user postgres, listen on all addresses, a
# temporary server (socket only) to create the database and run /docker-entrypoint-initdb.d/
# (*.sh, *.sql, *.sql.gz), then the real server in the foreground.
#
# Log lines, as in the official image: the temporary server is started by `pg_ctl`, which
# sends the server's log to STDOUT, so its "database system is ready to accept connections"
# appears on stdout; the final server logs to STDERR, so the same line appears there once it
# accepts TCP connections. testcontainers-modules 0.15's Postgres waits for the line on stderr,
# then on stdout (both anywhere in the container's log), i.e. for the final server.
# A restart on an existing data folder prints it on stderr only, as the official image does.
set -Eeo pipefail

# file_env VAR [DEFAULT]: VAR from $VAR or from the file named by $VAR_FILE.
file_env() {
    local var="$1" fileVar="${1}_FILE" def="${2:-}"
    if [ "${!var:-}" ] && [ "${!fileVar:-}" ]; then
        printf >&2 'error: both %s and %s are set (but are exclusive)\n' "$var" "$fileVar"
        exit 1
    fi
    local val="$def"
    if [ "${!var:-}" ]; then
        val="${!var}"
    elif [ "${!fileVar:-}" ]; then
        val="$(<"${!fileVar}")"
    fi
    export "$var"="$val"
    unset "$fileVar"
}

setup_env() {
    file_env POSTGRES_PASSWORD
    file_env POSTGRES_USER postgres
    file_env POSTGRES_DB "$POSTGRES_USER"
    file_env POSTGRES_INITDB_ARGS
    : "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
    export POSTGRES_HOST_AUTH_METHOD
    declare -g DATABASE_ALREADY_EXISTS=
    if [ -s "$PGDATA/PG_VERSION" ]; then
        DATABASE_ALREADY_EXISTS=true
    fi
}

create_db_directories() {
    local user
    user="$(id -u)"
    mkdir -p "$PGDATA"
    chmod 00700 "$PGDATA" || :
    mkdir -p /var/run/postgresql || :
    chmod 03775 /var/run/postgresql || :
    if [ "$user" = 0 ]; then
        find "$PGDATA" \! -user postgres -exec chown postgres: '{}' +
        find /var/run/postgresql \! -user postgres -exec chown postgres: '{}' +
    fi
}

verify_minimum_env() {
    if [ -z "$POSTGRES_PASSWORD" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != trust ]; then
        cat >&2 <<'EOE'
Error: Database is uninitialized and superuser password is not specified.
       You must specify POSTGRES_PASSWORD to a non-empty value for the
       superuser. For example, "-e POSTGRES_PASSWORD=password" on "docker run".

       You may also use "POSTGRES_HOST_AUTH_METHOD=trust" to allow all
       connections without a password. This is *not* recommended.
EOE
        exit 1
    fi
    if [ "$POSTGRES_HOST_AUTH_METHOD" = trust ]; then
        printf 'warning: POSTGRES_HOST_AUTH_METHOD=trust: every connection is allowed without a password\n' >&2
    fi
}

# The password reaches initdb through a pipe, never the command line. (The process
# substitution must be in the initdb command itself: it is closed when its command ends.)
init_database_dir() {
    # shellcheck disable=SC2086  # POSTGRES_INITDB_ARGS is a list of words, as in the official image
    if [ -n "$POSTGRES_PASSWORD" ]; then
        initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") $POSTGRES_INITDB_ARGS
    else
        initdb --username="$POSTGRES_USER" $POSTGRES_INITDB_ARGS
    fi
}

# Listen on every address (the official image bakes this into its sample config) and accept
# password (or trust) logins from anywhere.
setup_config() {
    printf "\n# oxigram-postgres (docker-entrypoint.sh)\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
    {
        printf '\n'
        if [ "$POSTGRES_HOST_AUTH_METHOD" = trust ]; then
            printf '# warning trust is enabled for all connections\n'
        fi
        printf 'host all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD"
    } >>"$PGDATA/pg_hba.conf"
}

process_sql() {
    local query_runner=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
    if [ -n "$POSTGRES_DB" ]; then
        query_runner+=(--dbname "$POSTGRES_DB")
    fi
    PGHOST='' PGHOSTADDR='' "${query_runner[@]}" "$@"
}

setup_db() {
    local db="$POSTGRES_DB" exists
    exists="$(POSTGRES_DB='' process_sql --dbname postgres --set db="$db" --tuples-only <<-'EOSQL'
		SELECT 1 FROM pg_database WHERE datname = :'db' ;
	EOSQL
    )"
    if [ -z "$exists" ]; then
        POSTGRES_DB='' process_sql --dbname postgres --set db="$db" <<-'EOSQL'
			CREATE DATABASE :"db" ;
		EOSQL
        printf '\n'
    fi
}

process_init_files() {
    local f
    printf '\n'
    for f; do
        case "$f" in
        *.sh)
            if [ -x "$f" ]; then
                printf '%s: running %s\n' "$0" "$f"
                "$f"
            else
                printf '%s: sourcing %s\n' "$0" "$f"
                # shellcheck disable=SC1090
                . "$f"
            fi
            ;;
        *.sql)
            printf '%s: running %s\n' "$0" "$f"
            process_sql -f "$f"
            printf '\n'
            ;;
        *.sql.gz)
            printf '%s: running %s\n' "$0" "$f"
            gunzip -c "$f" | process_sql
            printf '\n'
            ;;
        *) printf '%s: ignoring %s\n' "$0" "$f" ;;
        esac
        printf '\n'
    done
}

# The temporary server: Unix socket only. pg_ctl sends the server's log to stdout.
temp_server_start() {
    if [ "$1" = postgres ]; then shift; fi
    set -- "$@" -c listen_addresses='' -p "${PGPORT:-5432}"
    NOTIFY_SOCKET='' PGUSER="${PGUSER:-$POSTGRES_USER}" \
        pg_ctl -D "$PGDATA" -o "$(printf '%q ' "$@")" -w start
}

temp_server_stop() {
    PGUSER="${PGUSER:-postgres}" pg_ctl -D "$PGDATA" -m fast -w stop
}

# `postgres --help`, `-V` and the like need no database.
wants_help() {
    local arg
    for arg; do
        case "$arg" in
        -'?' | --help | --describe-config | -V | --version) return 0 ;;
        esac
    done
    return 1
}

main() {
    # `docker run IMAGE -c fsync=off` (what testcontainers passes) means `postgres -c fsync=off`.
    if [ "${1:0:1}" = '-' ]; then
        set -- postgres "$@"
    fi

    if [ "$1" = postgres ] && ! wants_help "$@"; then
        setup_env
        create_db_directories
        if [ "$(id -u)" = 0 ]; then
            # Drop to the postgres user and run this script again (setpriv execs, like gosu).
            export HOME=/var/lib/postgresql
            exec setpriv --reuid=postgres --regid=postgres --init-groups -- "${BASH_SOURCE[0]}" "$@"
        fi

        if [ -z "$DATABASE_ALREADY_EXISTS" ]; then
            verify_minimum_env
            # initdb needs the running user to be in /etc/passwd (it is: postgres).
            init_database_dir
            setup_config

            export PGPASSWORD="${PGPASSWORD:-$POSTGRES_PASSWORD}"
            temp_server_start "$@"
            setup_db
            shopt -s nullglob
            process_init_files /docker-entrypoint-initdb.d/*
            shopt -u nullglob
            temp_server_stop
            unset PGPASSWORD

            printf '\nPostgreSQL init process complete; ready for start up.\n\n'
        else
            printf '\nPostgreSQL Database directory appears to contain a database; Skipping initialization\n\n'
        fi
    fi

    exec "$@"
}

main "$@"
