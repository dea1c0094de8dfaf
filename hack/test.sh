#!/usr/bin/env bash
# `make test`: services up, Debian's chromium and prometheus, static checks, the suite on PostgreSQL
# (Kubernetes and browser tests included; screenshots in build/screenshots/), then a smoke run
# of the database tests on SQLite. Fails on the first failing step.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
PY=$VENV/bin/python

step() { printf '\n==> %s\n' "$*"; }

step "services (PostgreSQL, Redis)"
# Command substitution (not a pipe) so a failing services.sh stops the run; only the two
# expected variables are taken from its output.
service_env=$(bash hack/services.sh)
for key in DATABASE_URL REDIS_URL; do
  value=$(printf '%s\n' "$service_env" | sed -n "s/^$key=//p" | tail -n 1)
  [ -n "$value" ] || { echo "hack/services.sh printed no $key" >&2; exit 1; }
  export "$key=$value"
done

step "Debian's chromium for the browser tests (never a downloaded browser)"
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "/usr/bin/chromium is missing and this is not root: apt-get install chromium first" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
/usr/bin/chromium --version

step "Debian's prometheus for the utilisation tests (a real server, never a mock)"
if ! command -v prometheus >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "prometheus is missing and this is not root: apt-get install prometheus first" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
prometheus --version 2>&1 | head -n 1
export GPUPOOL_REQUIRE_PROMETHEUS=1

if [ -x hack/k8s-testenv/build.sh ]; then
  step "local Kubernetes binaries (cached)"
  bash hack/k8s-testenv/build.sh
fi

step "ruff"
$VENV/bin/ruff check .
$VENV/bin/ruff format --check .

step "mypy"
$VENV/bin/mypy gpupool

step "django checks"
$PY manage.py check
$PY manage.py makemigrations --check --dry-run

step "native decision core (mypyc; rebuilt only when the core's sources change)"
$PY hack/build_native.py --require

step "pytest on PostgreSQL (compiled core)"
GPUPOOL_EXPECT_NATIVE=1 GPUPOOL_REQUIRE_BROWSER=1 $VENV/bin/pytest -p no:cacheprovider

step "decision core tests on plain Python"
GPUPOOL_PURE_CORE=1 $VENV/bin/pytest -p no:cacheprovider -q tests/scheduler

step "pytest smoke on SQLite"
env -u DATABASE_URL -u REDIS_URL $VENV/bin/pytest -p no:cacheprovider -q -m "not k8s and not browser and not slow" tests --ignore=tests/scheduler --ignore=tests/simulation
