# Two commands matter: `make run` and `make test`. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# Debian packages the tests use: a real Redis for the shared rate limiter and cache, and a real
# Chromium for the browser pass over the Streamlit pages.
SYSTEM_PACKAGES := redis-server chromium chromium-driver

# The evaluation sets beside a developer's clone, when that folder is there and RAG_EVAL_DATA is not
# set: the tests and notebooks then run on the real sets. Without it they use the small sets the tests
# write, and `make eval` reads RAG_EVAL_DATA (fill it with `rag eval fetch scifact jsquad`).
EVAL_DATA_ENV := $(if $(RAG_EVAL_DATA),,$(if $(wildcard ../shared/eval-data),RAG_EVAL_DATA=$(abspath ../shared/eval-data)))

.PHONY: run serve mcp lab test install install-dev system-deps eval benchmarks-doc lint typecheck clean-venv

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python 3.10+ is required"'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo "Installing the workbench into $(VENV) (pip is quiet; a few minutes the first time) ..."
	$(PIP) install -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	@echo "Installing the workbench with its test, torch, eval, notebook and local-LLM extras into $(VENV) (pip is quiet; several minutes the first time) ..."
	$(PIP) install -e '.[dev,torch,eval,notebooks,local-llm]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@ $(VENV)/.installed $(VENV)/.installed-lab

$(VENV)/.installed-lab: pyproject.toml | $(BIN)/python
	@echo "Installing the workbench with JupyterLab into $(VENV) (pip is quiet; a few minutes the first time) ..."
	$(PIP) install -e '.[notebooks]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# Installs the Debian packages above when one is missing (needs root or sudo; says so otherwise).
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v chromium >/dev/null || missing="$$missing chromium chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO=sudo; else \
	    echo "Missing:$$missing. Install them with your package manager (Debian: apt-get install$$missing)."; exit 1; fi; \
	  echo "Installing$$missing (Debian packages) ..."; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

run: $(VENV)/.installed
	$(BIN)/streamlit run app.py --server.headless true --server.address 127.0.0.1 --browser.gatherUsageStats false

serve: $(VENV)/.installed
	$(BIN)/rag serve

mcp: $(VENV)/.installed
	$(BIN)/rag mcp

# JupyterLab on loopback over notebooks/ (as root too, as in a container). The project's .env is exported first, so the kernels use the
# same RAG_DATA_DIR (one embedded PostgreSQL) as `make run` and `rag`; LAB_PORT picks the port.
LAB_PORT ?= 8888
lab: $(VENV)/.installed-lab
	set -a; [ ! -f .env ] || . ./.env; set +a; \
	$(BIN)/jupyter lab --ip 127.0.0.1 --port $(LAB_PORT) --no-browser --ServerApp.root_dir=notebooks \
	  $$([ "$$(id -u)" != 0 ] || echo --allow-root)

test: $(VENV)/.installed-dev system-deps
	$(EVAL_DATA_ENV) $(BIN)/python -m pytest -q

# Type-checks the facade and its result types (the files are listed under [tool.mypy] in pyproject.toml).
typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

# Runs every notebook on the full evaluation sets and writes eval/results/*.json and the charts.
eval: $(VENV)/.installed-dev
	$(EVAL_DATA_ENV) RAG_EVAL_SAMPLE=0 RAGAS_DO_NOT_TRACK=true $(BIN)/python eval/run_notebooks.py

# Rewrites docs/benchmarks.md from eval/results/*.json (standard library only: no install needed);
# tests/test_benchmarks_doc.py fails while the page and the files disagree.
benchmarks-doc:
	$(PYTHON) eval/benchmarks_doc.py

clean-venv:
	rm -rf $(VENV)
