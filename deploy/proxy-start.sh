#!/bin/sh
# The proxy's start (docker-compose.yml, service `proxy`): writes the parts of deploy/nginx.conf
# that depend on the deployment into /tmp/nginx (the root filesystem is read-only; /tmp is a
# tmpfs), then runs nginx in the foreground.
#   resolver.conf  the network's DNS (Docker's 127.0.0.11, podman's gateway), asked again every
#                  5 s for `api`, so scaled and restarted api containers are found
#   listen.conf    plain HTTP on 5678, or TLS when MINI_N8N_TLS_CERTIFICATE and MINI_N8N_TLS_KEY
#                  name a certificate and its key (docker-compose.tls.yml, docs/tls.md)
#   metrics.conf   /metrics answers 404 unless MINI_N8N_PROXY_METRICS=true
#   bodies.conf    request bodies bounded as the api bounds them: MINI_N8N_MAX_BODY_BYTES, and
#                  MINI_N8N_BODY_IDLE_SECONDS between two reads (rounded up to whole seconds)
set -eu
conf=/tmp/nginx
mkdir -p "$conf"
nameserver=$(grep -m1 '^nameserver' /etc/resolv.conf | cut -d' ' -f2)
echo "resolver $nameserver valid=5s ipv6=off;" > "$conf/resolver.conf"

if [ -n "${MINI_N8N_TLS_CERTIFICATE:-}" ]; then
    cat > "$conf/listen.conf" <<TLS
listen 5678 ssl;
ssl_certificate ${MINI_N8N_TLS_CERTIFICATE};
ssl_certificate_key ${MINI_N8N_TLS_KEY:?MINI_N8N_TLS_KEY: the certificate's key};
ssl_protocols TLSv1.2 TLSv1.3;
ssl_session_cache shared:tls:10m;
ssl_session_timeout 1h;
TLS
else
    echo "listen 5678;" > "$conf/listen.conf"
fi

case "${MINI_N8N_PROXY_METRICS:-false}" in
    true) : > "$conf/metrics.conf" ;;
    false) cat > "$conf/metrics.conf" <<'HIDDEN'
location = /metrics {
    default_type application/json;
    return 404 '{"message":"Not found"}\n';
}
HIDDEN
    ;;
    *) echo "MINI_N8N_PROXY_METRICS must be true or false, not ${MINI_N8N_PROXY_METRICS}" >&2; exit 2 ;;
esac

max_body=${MINI_N8N_MAX_BODY_BYTES:-16777216}
idle=${MINI_N8N_BODY_IDLE_SECONDS:-10}
idle_seconds=${idle%%.*}
[ "$idle_seconds" = "$idle" ] || idle_seconds=$((${idle_seconds:-0} + 1))
cat > "$conf/bodies.conf" <<BODIES
client_max_body_size $max_body;
client_body_timeout ${idle_seconds}s;
BODIES

# -e stderr: nginx's start-up messages too (its built-in error log path is on the read-only root).
exec nginx -e stderr -g 'daemon off;'
