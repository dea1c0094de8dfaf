#!/usr/bin/env bash
# `make demo-k8s`: the living demo against the local Kubernetes plane (kwokctl, KWOK GPU nodes)
# with the loop as a Celery worker and beat on Redis, and PostgreSQL (docs/demo.md).
#
# 1. PostgreSQL and Redis (hack/services.sh); the demo's own database (DEMO_DATABASE_URL,
#    default gpupool_demo on that server) and Redis database (DEMO_REDIS_URL, default /5, so
#    no other Celery worker on the server takes its tasks).
# 2. The plane: DEMO_KUBECONFIG if set; else the one `make k8s-up` started, if it runs; else
#    `make k8s-up` now with the demo's node profile (`demo`: the 64 nodes `make demo` runs on,
#    for which seed-demo sizes the quotas), stopped again when the demo stops.
# 3. migrate, seed-demo, a namespace for each demo tenant, then `gpupool demo --celery`: the web
#    server, Celery workers and beat running the control loop on the plane, and the workload
#    generator. Ctrl-C (or SIGTERM) stops all of them, and the plane if it was started here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

log() { echo "demo-k8s: $*" >&2; }

services=$(bash hack/services.sh)
server_db=$(sed -n 's/^DATABASE_URL=//p' <<<"$services")
server_redis=$(sed -n 's/^REDIS_URL=//p' <<<"$services")
export DATABASE_URL=${DEMO_DATABASE_URL:-${server_db%/*}/gpupool_demo}
export REDIS_URL=${DEMO_REDIS_URL:-${server_redis%/*}/5}
"$PY" - "$server_db" "$DATABASE_URL" <<'EOF'
"""Create the demo's database on the server if it is not there."""
import sys
from urllib.parse import urlsplit

import psycopg

server, demo = sys.argv[1], sys.argv[2]
name = urlsplit(demo).path.lstrip("/")
with psycopg.connect(server, autocommit=True) as connection:
    if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
        connection.execute(f'CREATE DATABASE "{name}"')
        print(f"demo-k8s: created database {name}", file=sys.stderr)
EOF

started_plane=0
if [ -n "${DEMO_KUBECONFIG:-}" ]; then
  kubeconfig=$DEMO_KUBECONFIG
elif status=$("$PY" -m hack.k8s_plane status 2>/dev/null) && grep -q '"running": true' <<<"$status"; then
  kubeconfig=$PWD/.k8s/kubeconfig
  log "using the running plane ($kubeconfig)"
  if ! grep -q '"profile": "demo"' <<<"$status"; then
    # The demo's quotas are sized for the demo's nodes; on other nodes seed-demo refuses.
    log "the running plane was not started with the demo's nodes (\`--profile demo\`):" \
      "stop it with \`make k8s-down\` and run \`make demo-k8s\` again, which starts one"
    exit 2
  fi
else
  make --no-print-directory k8s-up K8S_UP_ARGS="--profile demo"
  started_plane=1
  kubeconfig=$PWD/.k8s/kubeconfig
fi
export GPUPOOL_CLUSTER=kubernetes GPUPOOL_KUBECONFIG=$kubeconfig

demo=""
finish() {
  status=$?
  if [ -n "$demo" ] && kill -0 "$demo" 2>/dev/null; then
    kill -TERM "$demo" 2>/dev/null || true
    wait "$demo" || true
  fi
  if [ "$started_plane" = 1 ]; then
    "$PY" -m hack.k8s_plane down >&2 || true
  fi
  exit "$status"
}
trap finish EXIT
trap 'exit 0' INT TERM

"$PY" manage.py migrate --noinput
"$PY" manage.py gpupool seed-demo
# Each demo tenant owns the namespace of its name; the pods gpupool creates live there. The
# demo's broken GPUs (seed_demo.UNHEALTHY_GPUS) are left out of their nodes' allocatable, as
# NVIDIA's device plugin leaves out a GPU it finds unhealthy (KWOK keeps the node's status),
# and named in the label gpupool.io/unhealthy-gpus, so the sync marks those GPUs
# (hack.k8s_plane.mark_unhealthy_gpus); their reasons are recorded as a health source would
# (demo.record_gpu_findings).
"$PY" manage.py shell -c '
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from django.conf import settings
from gpupool.cli.subcommands.demo import record_gpu_findings
from gpupool.cli.subcommands.seed_demo import UNHEALTHY_GPUS
from gpupool.tenancy.models import Tenant
from hack.k8s_plane import mark_unhealthy_gpus

config.load_kube_config(config_file=settings.GPUPOOL_KUBECONFIG)
core = client.CoreV1Api()
for namespace in sorted({n for t in Tenant.objects.all() for n in t.namespace_names()}):
    try:
        core.create_namespace({"metadata": {"name": namespace}})
    except ApiException as error:
        if error.status != 409:
            raise
broken = mark_unhealthy_gpus(core, UNHEALTHY_GPUS)  # none where the demo profile is not
record_gpu_findings({name: UNHEALTHY_GPUS[name] for name in broken})
'
# The loop talks to the plane as an installed gpupool does: as the service account that
# deploy/kubernetes/rbac.yaml grants what the scheduler calls (the admin's kubeconfig made
# the namespaces and broke the GPUs above).
scheduler_kubeconfig=$("$PY" -m hack.k8s_plane scheduler-kubeconfig --admin "$kubeconfig" \
  --out "$(dirname "$kubeconfig")/scheduler-kubeconfig")
export GPUPOOL_KUBECONFIG=$scheduler_kubeconfig
log "database ${DATABASE_URL##*/}, broker $REDIS_URL, plane $kubeconfig (the loop as gpupool-scheduler)"
"$PY" manage.py gpupool demo --celery ${DEMO_ARGS:-} &
demo=$!
wait "$demo"
