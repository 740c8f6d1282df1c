#!/bin/sh
# First start: initdb with POSTGRES_USER as superuser (scram password
# POSTGRES_PASSWORD) and create POSTGRES_DB. Every start: run postgres in the
# foreground on POSTGRES_LISTEN:PGPORT (stopping it on SIGTERM is a clean
# shutdown, so a restart loses nothing committed).
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/run/postgresql" -w start >/dev/null
    PGPASSWORD=$POSTGRES_PASSWORD createdb -h /run/postgresql -U "$POSTGRES_USER" "$POSTGRES_DB"
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "p4relay-postgres: initialised $PGDATA, database $POSTGRES_DB"
fi
exec postgres -D "$PGDATA" -c listen_addresses="$POSTGRES_LISTEN" -p "$PGPORT" \
    -c unix_socket_directories=/run/postgresql
