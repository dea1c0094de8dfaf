# gpupool — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help venv native demo demo-k8s serve test lint format typecheck check services k8s-build k8s-up k8s-down bench clean

help: ## List the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

venv: $(STAMP) ## Create .venv and install gpupool with its dev tools

native: $(STAMP) ## Compile the decision core with mypyc into build/native (used when present; needs a C compiler)
	$(PY) hack/build_native.py

GPUPOOL_SIM_SPEED ?= 60

demo: $(STAMP) ## The living demo on 127.0.0.1:8000: SQLite, the simulated cluster, the control loop and a workload generator (Ctrl-C stops; GPUPOOL_SIM_SPEED=60, DEMO_ARGS)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py gpupool seed-demo
	$(PY) manage.py gpupool demo --speed $(GPUPOOL_SIM_SPEED) $(DEMO_ARGS)

demo-k8s: $(STAMP) k8s-build ## The living demo on the local Kubernetes plane (KWOK GPU nodes): PostgreSQL, Celery worker and beat on Redis, web, generator (Ctrl-C stops; DEMO_ARGS)
	bash hack/demo_k8s.sh

test: $(STAMP) ## Install and start PostgreSQL, Redis and the local Kubernetes plane, then lint, type-check and run every test
	bash hack/test.sh

lint: $(STAMP) ## ruff lint and format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP) ## Apply ruff's formatting and safe fixes
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

typecheck: $(STAMP) ## mypy (strict on the decision core and cluster backends)
	$(VENV)/bin/mypy gpupool

check: $(STAMP) ## Django system checks and missing migrations
	$(PY) manage.py check
	$(PY) manage.py makemigrations --check --dry-run

services: ## Install (as root) and start PostgreSQL and Redis on 127.0.0.1
	bash hack/services.sh

k8s-build: ## Build kube-apiserver, etcd, KWOK and kwokctl (cached outside the repo by version)
	bash hack/k8s-testenv/build.sh

k8s-up: $(STAMP) k8s-build ## Start the local plane (kwokctl: etcd, kube-apiserver, controllers, scheduler, KWOK) with fake GPU nodes; kubeconfig in .k8s/ (options: K8S_UP_ARGS)
	$(PY) -m hack.k8s_plane up $(K8S_UP_ARGS)

k8s-down: $(STAMP) ## Stop what k8s-up started
	$(PY) -m hack.k8s_plane down

bench: native ## Benchmark B1: one scheduling cycle at 5,000 nodes (compiled core)
	$(PY) manage.py gpupool bench cycle --json

clean: ## Remove the virtualenv, the compiled core, caches and the SQLite database
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache db.sqlite3 staticfiles
