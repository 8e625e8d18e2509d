#!/bin/sh
# Redis' start (docker-compose.yml, service `redis`): its password comes from the
# `redis_password` secret and reaches redis-server on its standard input (`redis-server -`
# reads its configuration there), so it is on no command line (`ps`, /proc/<pid>/cmdline) and
# in no environment (`docker inspect`). The arguments are redis-server's own options.
set -eu
secret=/run/secrets/redis_password
password=$(cat "$secret")
case "$password" in
    "" | *[!A-Za-z0-9]*)
        echo "redis: $secret must hold the password, letters and digits only (docs/deploy.md makes one)" >&2
        exit 1 ;;
esac
exec redis-server - "$@" <<CONFIG
requirepass $password
CONFIG
