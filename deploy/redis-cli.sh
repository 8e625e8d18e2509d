#!/bin/sh
# redis-cli logged in with the `redis_password` secret, mounted in the redis container as
# `redis-cli-auth` (docker-compose.yml): the password goes to redis-cli in REDISCLI_AUTH, an
# environment of its own process only, never on a command line.
#   docker compose exec redis redis-cli-auth --scan --pattern 'chat:*'
set -eu
REDISCLI_AUTH=$(cat /run/secrets/redis_password)
export REDISCLI_AUTH
exec redis-cli "$@"
