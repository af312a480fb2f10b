# Two commands set everything up:  `make demo`  (install, then verify a bundled log)  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_DIR ?= sample_logs/compaction-recovery
SHARED_LOGS ?= ../shared/dsh-logs

.PHONY: install demo test test-compiled lint typecheck reference browser bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The bundled session in two generations: v0 as dsh 0.1.1 wrote it, v3 as the official migration writes it.
# A directory is read as dsh reads it (the newest generation); --all-generations verifies both.
demo: install
	$(BIN)/audit verify $(DEMO_DIR)
	$(BIN)/audit verify --all-generations $(DEMO_DIR)
	$(BIN)/audit rebuild --format digest $(DEMO_DIR)/session.jsonl
	$(BIN)/audit rebuild --format digest $(DEMO_DIR)/session.v3.jsonl

# The npm reference implementation, for the differential tests (pinned in tests/reference/package.json),
# the official format-migration packages of the v1/v2/v3 oracle (tests/reference-format/package.json), and the
# published dsh CLI of the end-to-end tests (tests/live-dsh/package.json).
reference:
	bash tests/reference/install.sh
	bash tests/reference-format/install.sh
	bash tests/live-dsh/install.sh

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

# Debian's headless Chromium and its chromedriver, for the HTML report's browser tests (tests/test_html_report.py).
browser:
	command -v chromium && command -v chromedriver || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver)

test: install reference browser lint
	DSH_LOGS=$(abspath $(SHARED_LOGS)) $(BIN)/pytest -n 2 -q; status=$$?; \
	echo "screenshots of the HTML reports the browser tests opened: $${DSH_AUDIT_TEST_OUTPUT:-$(abspath test-output)}/html/"; \
	exit $$status

# The optional compiled fast path (setup.py, mypyc) in its own venv, a non-editable install, and the fast path's
# differential and fuzz suites run against it: the tests import dsh_audit from that install, not from src/.
COMPILED_VENV ?= .venv-compiled
test-compiled:
	$(PYTHON) -m venv $(COMPILED_VENV)
	$(COMPILED_VENV)/bin/pip install --quiet --upgrade pip setuptools
	$(COMPILED_VENV)/bin/pip install --quiet '.[dev]' 'mypy==2.4.1'   # the dependencies mypyc reads the types of
	DSH_AUDIT_COMPILE=1 $(COMPILED_VENV)/bin/pip install --quiet --no-build-isolation --no-deps --force-reinstall .
	cd tests && DSH_AUDIT_EXPECT_COMPILED=1 DSH_LOGS=$(abspath $(SHARED_LOGS)) ../$(COMPILED_VENV)/bin/pytest -q \
		-p no:cacheprovider test_fastpath.py test_fuzz.py test_fuzz_numbers.py test_cache_fastpath.py

bench: install reference
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) $(COMPILED_VENV) build tests/reference/node_modules tests/reference-format/node_modules tests/live-dsh/node_modules benchmarks/data
