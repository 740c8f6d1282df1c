#!/bin/sh
# p4relay-init: the compose stack's one-shot set-up, safe to run on every `up`:
#   1. migrate the database to the schema head (waits for PostgreSQL);
#   2. create the console admin (P4RELAY_INIT_ADMIN_USER /
#      P4RELAY_INIT_ADMIN_PASSWORD), or leave an existing one alone;
#   3. create the ingest token rtpagent and the collector send with, once,
#      into $P4RELAY_INIT_SECRETS_DIR/ingest.token (a volume they mount read-only);
#   4. register the switch the collector polls (P4RELAY_INIT_SWITCH_NAME +
#      P4RELAY_INIT_SWITCH_GRPC, its BfRt gRPC address).
# The former names (P4RELAY_ADMIN_USER, P4RELAY_SWITCH_NAME, ...) are still
# read, below the new ones, with a warning.
set -eu

log() { echo "p4relay-init: $*"; }

# setting NAME OLD DEFAULT: $NAME, else the former $OLD (with a warning), else DEFAULT.
setting() {
    if [ -n "$(printenv "$1" || true)" ]; then
        printenv "$1"
    elif [ -n "$(printenv "$2" || true)" ]; then
        log "$2 is deprecated and will be removed: use $1" >&2
        printenv "$2"
    else
        printf '%s\n' "$3"
    fi
}

secrets=$(setting P4RELAY_INIT_SECRETS_DIR P4RELAY_SECRETS_DIR /run/p4relay)
admin=$(setting P4RELAY_INIT_ADMIN_USER P4RELAY_ADMIN_USER admin)
password=$(setting P4RELAY_INIT_ADMIN_PASSWORD P4RELAY_ADMIN_PASSWORD "")
switch_name=$(setting P4RELAY_INIT_SWITCH_NAME P4RELAY_SWITCH_NAME sw1)
switch_grpc=$(setting P4RELAY_INIT_SWITCH_GRPC P4RELAY_SWITCH_GRPC 127.0.0.1:50052)
wait_s=${P4RELAY_INIT_DB_WAIT_S:-120}

i=0
until out=$(p4relay-server migrate 2>&1); do
    i=$((i + 2))
    if [ "$i" -ge "$wait_s" ]; then
        echo "$out" >&2
        log "database not reachable or migration failed after ${wait_s}s" >&2
        exit 1
    fi
    sleep 2
done
log "schema at head"

if [ -z "$password" ]; then
    log "P4RELAY_INIT_ADMIN_PASSWORD unset: no console admin created"
elif out=$(printf '%s\n' "$password" | p4relay-server create-admin --username "$admin" --password-stdin 2>&1); then
    log "$out"
elif echo "$out" | grep -q "already exists"; then
    log "admin '$admin' exists (password unchanged)"
else
    echo "$out" >&2
    exit 1
fi

umask 077
if [ -s "$secrets/ingest.token" ]; then
    log "ingest token exists in $secrets"
else
    p4relay-server create-token --name "ingest-${switch_name}" --scope ingest \
        > "$secrets/ingest.token.tmp" 2>/dev/null
    mv "$secrets/ingest.token.tmp" "$secrets/ingest.token"
    log "ingest token created in $secrets/ingest.token"
fi
# Readable by the components' user (uid 10001 in every p4relay image) only.
chmod 0400 "$secrets/ingest.token"

p4relay-server register-switch --name "$switch_name" --grpc-address "$switch_grpc"
log "done"
