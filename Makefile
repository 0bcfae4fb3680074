# jmp: `make install` then `make test`. PYTHON=... picks the interpreter (>= 3.12).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
FIND_PYTHON := for c in "$$PYTHON" python3.13 python3.12 python3 $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do \
	[ -n "$$c" ] || continue; \
	"$$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1 && { echo "$$c"; exit 0; }; \
	done; echo "no Python >= 3.12 found: set PYTHON=/path/to/python3.12" >&2; exit 1
export LITELLM_LOCAL_MODEL_COST_MAP := True
export OPENHANDS_SUPPRESS_BANNER := 1
# Our own code, byte-compiled at install: an editable install is not, and with
# PYTHONDONTWRITEBYTECODE set every jmp launch would compile ~50 modules (about 0.15 s).
CODE := cli kernel protocol host workers acp_server jev_harness apixly_jev_harness jmp_lab jmp_agent bench tests

.PHONY: install install-browser test test-install wheelhouse bench chaos chaos-rendered crash-states lint fmt type check demo docs clean

# The power-cut simulator (docs/RESILIENCE.md) needs libfuse 3 and fusermount3: installed here
# when missing and we are root with apt-get; else its tests skip and say why.
FUSE3 := command -v fusermount3 >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q fuse3 >/dev/null 2>&1 || \
	{ apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q fuse3 >/dev/null 2>&1; }; }; } || \
	echo "note: no fuse3 (libfuse 3, fusermount3): power cuts will be skipped" >&2

install:
	@$(FUSE3)
	@base=$$($(FIND_PYTHON)) || exit 1; \
	if [ -x $(PY) ] && ! $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then rm -rf $(VENV); fi; \
	[ -x $(PY) ] || "$$base" -m venv $(VENV); \
	$(PY) -m pip install -q --upgrade pip && \
	{ $(PY) -m pip uninstall -q -y jmp 2>/dev/null || true; } && \
	$(PY) -m pip install -q -c constraints.txt -e '.[test]' && \
	$(PY) -m compileall -q -j 0 main.py $(CODE) >/dev/null
	@$(MODERN_MCP)

# A client of MCP 2026-07-28 the suite drives the jev-harness MCP server with (and a server of
# that revision jmp's own client reaches): the mcp 2.x SDK, in a venv of its own, since it
# cannot sit beside OpenHands (fastmcp < 4, so mcp < 2). Without it those tests skip and say so.
MCP_MODERN := $(VENV)/mcp-2026-07-28
MCP_MODERN_PIN := mcp==2.3.0
MODERN_MCP := base=$$($(FIND_PYTHON)) || exit 1; \
	{ [ -x $(MCP_MODERN)/bin/python ] || "$$base" -m venv $(MCP_MODERN); } && \
	$(MCP_MODERN)/bin/python -m pip install -q '$(MCP_MODERN_PIN)' || \
	echo "note: no $(MCP_MODERN_PIN) in $(MCP_MODERN): the MCP 2026-07-28 client tests will be skipped" >&2

# The real browser of jev-harness's rendered pages (ChromiumProvider; docs/JEV-HARNESS.md):
# Debian's Chromium, driven by Playwright from the browser extra (in the test extra; never
# `playwright install`). Root with apt-get installs it (about 12 s); elsewhere it says so and
# its tests skip, or, with JMP_REQUIRE_BROWSER=1 (CI: .ci/run), this fails and so would they.
install-browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null; }; } || \
	{ echo "note: no chromium (apt-get install -y --no-install-recommends chromium, as root): rendered-page tests will be skipped (they fail under JMP_REQUIRE_BROWSER=1)" >&2; \
	[ -z "$${JMP_REQUIRE_BROWSER#0}" ]; }

# The suite in TEST_WORKERS processes (pytest-xdist; tests/conftest.py keeps each file, and the
# rows of each security-matrix scenario, on one worker): two by default, 650-700 s on this
# 2-core machine against 750 s in one (docs/DECISIONS.md "The suite in two processes"); TEST_WORKERS=1 runs it in one.
# It ends with its 15 slowest tests (setup, call and teardown each), where the time goes.
TEST_WORKERS ?= 2
test:
	$(PY) -m pytest -q --durations=15 $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS))

# `uv tool install` and `pipx install` of this checkout into a fresh home, offline (minutes):
# every wheel comes from WHEELHOUSE, filled once from PyPI by `make wheelhouse`.
WHEELHOUSE ?= .wheelhouse
wheelhouse:
	$(PY) -m pip wheel -q -w $(WHEELHOUSE) -c constraints.txt . uv pipx
	$(PY) -m pip download -q -d $(WHEELHOUSE) --only-binary=:all: 'setuptools>=77' wheel

test-install:
	@[ -d $(WHEELHOUSE) ] || $(MAKE) wheelhouse
	JMP_WHEELHOUSE=$(abspath $(WHEELHOUSE)) $(PY) -m pytest -q tests/test_install.py

bench:
	$(PY) -m bench

# Random SIGKILLs, power cuts and faults against jmp, invariants checked (docs/RESILIENCE.md).
# Short iterations aimed at kill points (--quick: 5-9 kills, or 3-5 cuts, cold in 1 of 8),
# CHAOS_LANES at a time, none started after CHAOS_MINUTES (~60 min in all, the issue-21
# campaign: 1,000 kills and 300 cuts are its goal, i.e. 17 kills and 5 cuts a minute); every
# other one a power iteration (CHAOS_POWER=mix; =only, or =off where FUSE cannot run: the
# power-cut mode says why and exits 2); CHAOS_JMP='cmd' tests another jmp. The table gives
# kills and cuts per minute, kills by target and path, and where the time went.
CHAOS_ITERATIONS ?= 100000
CHAOS_MINUTES ?= 58
CHAOS_SEED ?= 1
CHAOS_POWER ?= mix
CHAOS_LANES ?= 2
chaos:
	$(PY) -m jmp_lab.chaos --quick --lanes $(CHAOS_LANES) --iterations $(CHAOS_ITERATIONS) --minutes $(CHAOS_MINUTES) --seed $(CHAOS_SEED) --power $(CHAOS_POWER) $(if $(CHAOS_JMP),--jmp '$(CHAOS_JMP)')

# Kills of the harness worker while the real Chromium renders a page (jmp_lab/chaos/rendered.py,
# docs/RESILIENCE.md "Kills during rendered fetches"): warm and cold, the entry page and a link
# in turn; needs make install-browser (exit 2 naming what is missing otherwise).
CHAOS_RENDERED_ITERATIONS ?= 8
chaos-rendered:
	$(PY) -m jmp_lab.chaos rendered --iterations $(CHAOS_RENDERED_ITERATIONS) --seed $(CHAOS_SEED)

# Every crash state of the CLI workloads under each directory model (jmp_lab/chaos/explore):
# each checked on the disk, recovered through the CLI for CRASH_MINUTES, and the three broken
# builds that must be caught. docs/RESILIENCE.md, "Every crash state".
CRASH_WORKLOADS ?= cli
CRASH_MINUTES ?= 30
crash-states:
	$(PY) -m jmp_lab.chaos crash-states --workloads $(CRASH_WORKLOADS) --minutes $(CRASH_MINUTES) --broken all $(if $(CHAOS_JMP),--jmp '$(CHAOS_JMP)')

demo:
	$(PY) -m jmp_lab.demo

# docs/EVENTS.md, MESSAGES.md and INTERNALS.md from the code (tests/test_docs.py: never stale)
docs:
	$(PY) -m protocol.docgen docs

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

fmt:
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

type:
	$(PY) -m mypy

check: lint type test

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
