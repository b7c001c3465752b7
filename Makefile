# ddl-course: the two user commands are `make lab` and `make test` (see README.md).
# Students who were given the student edition (`make student`) use the Makefile in that folder.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.install-stamp
# JupyterLab refuses to start as root unless told; harmless for other users.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
# Python caches compiled modules in __pycache__ (git-ignored), even where the environment
# says not to (PYTHONDONTWRITEBYTECODE=1, as on some CI images): otherwise every pytest worker,
# notebook kernel and spawned worker process compiles course_lib afresh, and pytest rewrites
# every test module again in every worker (about 5 s of each test process's start-up here).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: help install lab test test-fast notebooks lint bench clean slides student scratch browser-deps gettext zh zh-extract test-zh lab-zh slides-zh

help:
	@echo "make lab        open the course in JupyterLab (installs into .venv first)"
	@echo "make test       run every test: unit, property, notebooks (nbval)"
	@echo "make test-fast  unit tests only, no notebooks and no slow tests"
	@echo "make notebooks  re-execute every notebook in place (refreshes stored outputs)"
	@echo "make bench      run the side-by-side benchmarks in benchmarks/"
	@echo "make slides     export every notebook to an offline reveal.js deck in build/slides/"
	@echo "make student    write the student edition to build/student/ (no solutions or notes; installs and"
	@echo "                opens on its own: give students that folder, its README says how)"
	@echo "make scratch    write the scratch edition to build/scratch/: the student edition in which learners"
	@echo "                write the teaching core themselves; \`make check\` there grades each function"
	@echo "make browser-deps  install playwright and Debian's chromium for the browser tests"
	@echo "make zh         build the Chinese edition in notebooks/zh/ from locale/ (make lab-zh opens it,"
	@echo "                make test-zh tests it, make zh-extract updates the catalogues after an edit)"
	@echo "make slides-zh  the Chinese decks, from notebooks/zh/, in build/slides/zh/ (runs make zh first)"
	@echo "make lint       ruff check"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-install only when pyproject.toml changed since the last install.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --upgrade --quiet pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m course_lib lab-settings
	touch $(STAMP)

install: $(STAMP)

# lab-settings: JupyterLab's news pop-up off in .venv (course_lib/tools/labsettings.py); run
# here too, so that a .venv installed before the setting existed gets it.
lab: $(STAMP)
	$(BIN)/python -m course_lib lab-settings
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ROOT_FLAG)

# Every test, in two pytest runs. (1) Every notebook under nbval, and the unit, property and
# process tests and the library's doctests, together, on two pytest-xdist workers more than
# there are cores: a notebook's kernel keeps about two thirds of a core busy and the process
# tests wait for their workers, so the extra workers fill those gaps (on 2 cores: 246 s with
# 4 workers, 270 s with 3, measured side by side in one session). --dist loadscope keeps
# a notebook's cells in order on one kernel (nbval needs it) and a module's tests, and so its
# module fixtures, together; the notebooks come first, as the longest pieces of work.
# (2) One test at a time, the tests that need the whole machine: Chromium's slider timings
# (marker browser) and those marked serial (the README's slide commands, whose decks the
# browser tests open). A run with failed tests (exit status 1) does not stop the next; one
# that is interrupted (2, e.g. at CI's time limit) does. The exit status is the higher one.
PYTEST := $(BIN)/python -m pytest -p no:cacheprovider
TEST_WORKERS := $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)' 2>/dev/null || echo 3)
NOTEBOOK_WORKERS := $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 2)' 2>/dev/null || echo 4)
test: $(STAMP)
	status=0; run() { "$$@" || { rc=$$?; [ $$rc -le $$status ] || status=$$rc; }; }; \
	run $(PYTEST) -n $(NOTEBOOK_WORKERS) --dist loadscope notebooks tests course_lib --doctest-modules \
	    --ignore=notebooks/zh --nbval-lax --nbval-current-env -m "not browser and not serial"; \
	[ $$status -gt 1 ] || run $(PYTEST) tests -m "browser or serial"; \
	exit $$status

# The unit and property tests, without the slow, browser and serial ones, on one worker more
# than there are cores (the process tests wait for their workers; the extra worker fills those
# gaps). No notebook is collected here, so nbval's plugin is not loaded: it imports nbformat,
# whose jsonschema builds an IRI grammar for 1.5 s, in the process that hands out the tests.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -p no:nbval -n $(TEST_WORKERS) --dist worksteal tests -m "not slow and not browser and not serial" -q

# Stored outputs are the course's claims: the measuring notebooks are re-executed only when
# the cores are free (python -m course_lib cores); BUSY_OK=1 stores them anyway.
notebooks: $(STAMP)
	@$(BIN)/python -m course_lib cores || [ "$(BUSY_OK)" = 1 ] || { \
	  echo "make notebooks: not re-executed: the stored speedups would be those of a shared machine." \
	       "Run it again when the machine is quiet (or BUSY_OK=1 make notebooks to store them anyway)."; exit 1; }
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace notebooks/*.ipynb

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf build .pytest_cache .ruff_cache

# Lecture slides: every notebook, with its stored outputs, exported to an offline reveal.js
# deck in build/slides/ (open build/slides/index.html); `python -m course_lib slides
# --execute` runs each notebook in a fresh kernel first. The first run fetches
# reveal.js, MathJax ... with npm into build/slides/vendor; later runs reuse them.
slides: $(STAMP)
	$(BIN)/python -m course_lib slides

# The student edition in build/student/: the notebooks without solutions, speaker notes or
# stored answers, with course_lib, data/, its own README.md and Makefile (`make install`,
# `make lab`), so it runs wherever it is copied. Give this folder to students; lecturers keep
# notebooks/ and the slides.
student: $(STAMP)
	$(BIN)/python -m course_lib student

# The scratch edition in build/scratch/ ("build it yourself"): the student edition in which the
# bodies of the teaching core (course_lib.grading.TEACHING_CORE) are stubs that name the chapter
# and section to read; its `make check [NAME=...]` grades the learner's functions against the
# course's references and names the mistake. `python -m course_lib scratch --fill DIR` puts the
# course's code back into an edition's stubs (CI: the filled edition is the course, and passes).
scratch: $(STAMP)
	$(BIN)/python -m course_lib scratch

# The Chinese edition (README.zh-CN.md): notebooks/zh/ is generated from the gettext catalogues
# in locale/zh_CN/LC_MESSAGES/ (never edited by hand). `make zh` checks the catalogues
# (msgfmt -c, placeholders, glossary terms) and builds it; `make zh-extract` updates the
# catalogues after an English sentence changed (it becomes fuzzy, its old English kept);
# `make test-zh` runs the Chinese notebooks under nbval; `make lab-zh` opens them. Needs the
# [i18n] extra (mdpo, polib) and GNU gettext (msgmerge, msgfmt), installed here.
I18N_STAMP := $(VENV)/.i18n-stamp
$(I18N_STAMP): pyproject.toml $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,i18n]'
	touch $(I18N_STAMP)

gettext:
	@command -v msgmerge >/dev/null 2>&1 && command -v msgfmt >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null 2>&1 || { echo "install GNU gettext (macOS: brew install gettext)"; exit 1; }; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq gettext; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq gettext; fi; }

zh: $(I18N_STAMP) gettext
	$(BIN)/python -m course_lib i18n check
	$(BIN)/python -m course_lib i18n build

zh-extract: $(I18N_STAMP) gettext
	$(BIN)/python -m course_lib i18n extract
	$(BIN)/python -m course_lib i18n stats

test-zh: zh
	$(PYTEST) -n $(NOTEBOOK_WORKERS) --dist loadscope --nbval-lax --nbval-current-env notebooks/zh

lab-zh: zh
	$(BIN)/python -m course_lib lab-settings
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks --LabApp.default_url=/lab/tree/zh $(ROOT_FLAG)

# The Chinese decks beside the English: every notebook of notebooks/zh/ exported to
# build/slides/zh/ with its own index.html and build/slides/vendor (shared with make slides).
# Prose and speaker notes are the translations; each code cell shows the stored outputs of
# the English notebook (the Chinese notebooks are generated without outputs).
slides-zh: zh
	$(BIN)/python -m course_lib slides --lang zh_CN

# Optional: what the real-browser tests need (playwright driving Debian's chromium;
# never `playwright install`). Without them `make test` skips those tests.
browser-deps: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,browser]'
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi; }
