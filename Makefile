# Two commands do everything: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.install-stamp
# Every package of the venv, the dev tools included, at one version with its hashes.
LOCK := requirements/lock.txt
# LIBERO-Plus's package, alone: its metadata pins numpy<2 (see the file).
PLUS_LOCK := requirements/liberoplus.txt
# Harbor alone, for the tests' ATIF validator: it declares Python >=3.12 and a job
# runner's dependencies; the two modules the tests use run on 3.11 with pydantic (see the file).
HARBOR_LOCK := requirements/harbor.txt
# The tests' real clients of the exports, each in a venv of its own because its pins clash
# with mailroom's: LeRobot's dataset loader (av<16, rerun-sdk<0.27; requirements/lerobot.txt)
# and inspect_scout's ATIF import (with Harbor's models, which declare Python >=3.12).
CLIENTS := $(VENV)/clients
LEROBOT_STAMP := $(CLIENTS)/lerobot/.install-stamp
LEROBOT_LOCK := requirements/lerobot-client.txt
LEROBOT_PIN := requirements/lerobot.txt
SCOUT_STAMP := $(CLIENTS)/inspect_scout/.install-stamp
SCOUT_LOCK := requirements/inspect-scout-client.txt
# Strict editable installs link files one by one: a new module needs a reinstall.
SOURCES := pyproject.toml setup.py $(shell find package mailbox orchestrator schemas prompts agents benchmarks -type f \( -name '*.py' -o -name '*.json' -o -name '*.txt' -o -name 'py.typed' \) 2>/dev/null)
export MUJOCO_GL := egl
export PYOPENGL_PLATFORM := egl

# The agent CLIs that real-CLI profiles run: each agent folder's install.json
# (agents/<name>/), pinned together with their hashes by one npm lockfile and installed
# into an ignored folder.
AGENT_CLIS := agent_clis
AGENT_CLIS_STAMP := $(AGENT_CLIS)/node_modules/.install-stamp
AGENT_SPECS := $(wildcard agents/*/install.json)

.PHONY: demo test test-fast lint typecheck system-deps agent-clis clients lock docs clean

$(STAMP): $(SOURCES) $(LOCK) $(PLUS_LOCK) $(HARBOR_LOCK)
	@$(MAKE) --no-print-directory system-deps
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r $(PLUS_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes --ignore-requires-python -r $(HARBOR_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e '.[dev,ray,plus]' --config-settings editable_mode=strict
	@# LIBERO-Plus finds its assets only in its own package folder: link libero-pro's there.
	$(BIN)/python -m mailroom.benchmarks.libero_plus.assets
	@# robosuite's documented one-time set-up: a private macros file equal to its defaults
	@# (no behaviour changes; it only stops the warning printed at every import).
	@$(BIN)/python -c "import os, shutil, robosuite; d = robosuite.__path__[0]; \
		t = os.path.join(d, 'macros_private.py'); \
		os.path.exists(t) or shutil.copyfile(os.path.join(d, 'macros.py'), t)" 2>/dev/null
	@touch $(STAMP)

# Order-only on the venv (its Python reads the specs): a changed spec or lockfile
# reinstalls the CLIs, a changed source file does not. npm runs no install script; each
# spec's after_install steps do what is needed, and its check proves the CLI starts
# (orchestrator/actors/agent_installation.py). Everything comes from the npm registry.
$(AGENT_CLIS_STAMP): $(AGENT_CLIS)/package.json $(AGENT_CLIS)/package-lock.json $(AGENT_SPECS) | $(STAMP)
	$(BIN)/python -m mailroom.orchestrator.actors.agent_installation install
	@touch $@

agent-clis: $(AGENT_CLIS_STAMP)

# A client's venv, made anew whenever its locks change (so that it holds exactly what they
# pin): $(1) its folder, $(2) its lock, installed as locked, $(3) a package installed alone
# (its own pins not followed). Every package of the locks by hash.
define client_venv
	rm -rf $(1)
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	$(1)/bin/python -m pip install --quiet --no-deps --require-hashes -r $(2)
	$(1)/bin/python -m pip install --quiet --no-deps --require-hashes --ignore-requires-python -r $(3)
	@touch $(1)/.install-stamp
endef

# PyTorch's Linux wheels carry CUDA's libraries (about 5.5 GB installed); the loader runs
# on the CPU. torchcodec decodes the videos with the system's FFmpeg (system-deps).
$(LEROBOT_STAMP): $(LEROBOT_LOCK) $(LEROBOT_PIN) | $(STAMP)
	$(call client_venv,$(CLIENTS)/lerobot,$(LEROBOT_LOCK),$(LEROBOT_PIN))

$(SCOUT_STAMP): $(SCOUT_LOCK) $(HARBOR_LOCK) | $(STAMP)
	$(call client_venv,$(CLIENTS)/inspect_scout,$(SCOUT_LOCK),$(HARBOR_LOCK))

clients: $(LEROBOT_STAMP) $(SCOUT_STAMP)

# Debian packages, installed where missing: Mesa's EGL on the CPU renders MuJoCo
# headless; bubblewrap (with libseccomp's filter) confines every actor; the system Python
# (standard library only) runs the built-in diagnostic actor inside the sandbox; chromium
# is the browser the viewer's tests drive; ImageMagick's MagickWand is what Wand calls for
# LIBERO-Plus's motion-blur noise; Node.js and npm install and launch the agent CLIs;
# FFmpeg's libraries are what LeRobot's video decoder (torchcodec) loads in the tests.
system-deps:
	@missing=""; \
	if ! ldconfig -p | grep -q 'libEGL_mesa.so.0' || ! ldconfig -p | grep -q 'libGL.so.1'; then \
		missing="$$missing libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri libgles2"; fi; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	ldconfig -p | grep -q 'libseccomp.so.2' || missing="$$missing libseccomp2"; \
	test -x /usr/bin/python3 || missing="$$missing python3"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	ldconfig -p | grep -q 'libMagickWand-6.Q16.so.6' || missing="$$missing libmagickwand-6.q16-6"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	command -v ffmpeg >/dev/null || missing="$$missing ffmpeg"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# `make lock` rewrites $(LOCK) from pyproject.toml ([project].dependencies, the dev, ray
# and plus extras) for CPython 3.11 on Linux x86_64, with every file's sha256. uv keeps
# each version the lock already holds unless pyproject.toml rules it out; to move one
# on, delete its lines from $(LOCK) first. uv itself, pinned, gets a venv of its own under $(VENV)/tools
# (made on first use; `make clean` removes it with the rest). Needs the package index.
UV_VERSION := 0.13.9
UV_VENV := $(VENV)/tools/uv
UV := $(UV_VENV)/bin/uv

$(UV):
	$(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet uv==$(UV_VERSION)

lock: $(UV)
	$(UV) pip compile --quiet pyproject.toml --extra dev --extra ray --extra plus --generate-hashes \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 -o $(LOCK)
	$(UV) pip compile --quiet requirements/lerobot-client.in --generate-hashes \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 -o $(LEROBOT_LOCK)
	$(UV) pip compile --quiet requirements/inspect-scout-client.in --generate-hashes \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 -o $(SCOUT_LOCK)

demo: $(STAMP) $(AGENT_CLIS_STAMP)
	$(BIN)/mailroom demo

# lint-imports: the layers of orchestrator/README.md's map ([tool.importlinter] in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy -p mailroom
	$(BIN)/mypy tests setup.py docs/hooks

# Everything, on three workers (the tests wait on actors and sandboxes as much as they
# compute), each handed whole files so that a file's shared simulators and runs are made
# once, the costliest first (tests/conftest.py). ruff and mypy --strict run as tests
# (tests/contract/test_code_checks.py), the import layers too (test_layers.py). The
# slowest tests are listed at the end.
test: $(STAMP) $(AGENT_CLIS_STAMP) $(LEROBOT_STAMP) $(SCOUT_STAMP)
	$(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=40

# For a quick look while working: the quick tests (tests/unit and tests/contract: no
# simulator, no sandbox, no cluster), ruff and mypy among them. make test runs everything.
test-fast: $(STAMP) $(AGENT_CLIS_STAMP)
	$(BIN)/pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests/unit tests/contract

# The documentation site (mkdocs.yml) into site/ (ignored), strict: a warning, a broken
# link or a missing page fails it; tests/browser/test_docs_site.py builds it the same way.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build *.egg-info $(AGENT_CLIS)/node_modules
