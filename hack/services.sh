#!/usr/bin/env bash
# Install (if missing) and start the services the tests use: PostgreSQL and Redis on 127.0.0.1.
# Idempotent. As root it installs Debian packages; otherwise it expects them installed.
# Prints the environment to use: DATABASE_URL and REDIS_URL.
set -euo pipefail

PG_USER=gpupool
PG_PASSWORD=gpupool
PG_DB=gpupool
REDIS_PORT=${GPUPOOL_REDIS_PORT:-6379}

log() { echo "services: $*" >&2; }
# Only the environment lines at the end may reach stdout: everything else goes to stderr.
exec 3>&1 1>&2
# `su postgres` from a folder postgres cannot read makes psql fail ("could not find own program").
cd /

need_install=()
command -v pg_ctlcluster >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 \
  || need_install+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need_install+=(redis-server)
if [ ${#need_install[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need_install[*]} and not root: install them first"; exit 1
  fi
  log "installing ${need_install[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need_install[@]}" >/dev/null
fi

# PostgreSQL: the newest installed cluster, started with pg_ctlcluster (pg_ctl refuses root).
version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main"' | grep -q .; then
  log "creating PostgreSQL $version cluster"
  pg_createcluster "$version" main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online"' | grep -q .; then
  log "starting PostgreSQL $version"
  # A postmaster killed without a reboot leaves its socket lock behind; drop locks whose pid is gone.
  for lock in /var/run/postgresql/.s.PGSQL.*.lock; do
    [ -e "$lock" ] || continue
    pid=$(head -n 1 "$lock")
    state=$(ps -o stat= -p "$pid" 2>/dev/null || true)  # a zombie still answers kill -0
    [ -n "$state" ] && [ "${state:0:1}" != Z ] || { log "removing stale $lock (pid $pid is gone)"; rm -f "$lock" "${lock%.lock}"; }
  done
  pg_ctlcluster "$version" main start 3>&-
fi
port=$(pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" {print $3}')
for _ in $(seq 1 30); do
  su postgres -c "pg_isready -q -h 127.0.0.1 -p $port" && break
  sleep 1
done
su postgres -c "psql -q -p $port -tAc \"SELECT 1 FROM pg_roles WHERE rolname='$PG_USER'\"" | grep -q 1 \
  || su postgres -c "psql -q -p $port -c \"CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD'\""
su postgres -c "psql -q -p $port -tAc \"SELECT 1 FROM pg_database WHERE datname='$PG_DB'\"" | grep -q 1 \
  || su postgres -c "psql -q -p $port -c \"CREATE DATABASE $PG_DB OWNER $PG_USER\""

# Redis: on loopback only, as a daemon, if nothing answers on its port.
if ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  log "starting redis on 127.0.0.1:$REDIS_PORT"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --save "" --appendonly no \
    --logfile /tmp/gpupool-redis.log >/dev/null 3>&-
  for _ in $(seq 1 30); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
fi

echo "DATABASE_URL=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$port/$PG_DB" >&3
echo "REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0" >&3
