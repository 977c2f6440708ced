# kiln: one GNU Makefile. Targets: all, test, test SAN=1, test TSAN=1, test-python,
# test-mpi, bench, bench-compare, check, run, fuzz, fuzz-sweep, coverage, install, uninstall,
# clean. Objects go to build/ (build-san/ for SAN=1, build-tsan/ for TSAN=1,
# build-mpi/ for MPI=1, build-cov/ for make coverage).
PREFIX ?= /usr/local
CC ?= cc
SAN ?= 0
NO_UNDEFINED := -Wl,--no-undefined

# Floating-point flags of the release build, and of the native fused
# kernels it compiles at run time (NATIVE_CFLAGS below).
FP_FLAGS := -fno-math-errno -ffp-contract=off -fno-trapping-math
WARN := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
        -Wmissing-prototypes -Wno-unused-parameter -Wvla
ifeq ($(FUZZ),1)
  # libFuzzer targets (make fuzz): clang, ASan+UBSan, coverage for the fuzzer.
  CC := clang
  BUILD := build-fuzz
  OPT := -O1 -g -fno-omit-frame-pointer \
         -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -Wno-pass-failed
else ifeq ($(COV),1)
  # make coverage: gcov instrumentation, no optimization (exact line counts).
  BUILD := build-cov
  OPT := -O0 -g --coverage $(FP_FLAGS)
else ifeq ($(TSAN),1)
  # ThreadSanitizer (Note [Threads] in include/kiln.h): clang with LLVM's
  # OpenMP runtime, whose regions TSAN understands through libarcher
  # (OMP_TOOL_LIBRARIES, set by `make test TSAN=1`); no libgomp suppressions.
  CC := clang
  BUILD := build-tsan
  # The runtime is linked into programs, not libkiln.so: the library leaves
  # __tsan_* undefined (a program built with -fsanitize=thread loads it).
  OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=thread -Wno-pass-failed -DKILN_TSAN $(FP_FLAGS)
  NO_UNDEFINED :=
else ifeq ($(SAN),1)
  BUILD := build-san
  # float-cast-overflow: gcc's "undefined" leaves it out (clang's includes
  # it: the run fuzzer found float -> int64 conversions out of range).
  OPT := -O1 -g -fno-omit-frame-pointer \
         -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all
else
  BUILD := build
  # -fvect-cost-model=dynamic: gcc 12's -O2 default (very-cheap) vectorizes no
  # loop of unknown trip count, i.e. none of the tile kernels.
  # -ffp-contract=off (Note [Explicit FMA] in src/ops/vmath.h): no implicit
  # FMAs; the exp/tanh polynomials and add's alpha use fmaf explicitly, so a
  # fused kernel built from several ops' expressions equals the ops run one
  # at a time, bit for bit.
  # -fno-trapping-math: kiln never enables FP traps; without it gcc masks every
  # op under a select (x != x ? x : y) instead of computing both sides and
  # blending, another ~20% on the transcendental tiles. Results are unchanged.
  # No -march: the library is built for the x86-64 baseline, its hot kernels
  # once more per CPU level and chosen at run time (Note [CPU levels] in
  # src/core/cpu.h), so what one machine builds runs on any x86-64.
  OPT := -O2 -g -fvect-cost-model=dynamic $(FP_FLAGS)
endif
# Distributed training (src/dist, issue 18): MPI=1 builds with Open MPI into
# build-mpi/ (build-san-mpi/ with SAN=1); only src/dist/comm.c includes
# mpi.h. Without it the dist calls fail with "built without MPI".
ifeq ($(MPI),1)
  BUILD := $(BUILD)-mpi
  MPI_CFLAGS := -DKILN_MPI $(patsubst -I%,-isystem %,$(shell mpicc --showme:compile))
  MPI_LIBS := $(shell mpicc --showme:link)
endif
# -fPIC: the same objects make libkiln.so, libkiln.a and kiln's programs.
CFLAGS := -Itests -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -fopenmp -fPIC -fvisibility=hidden -Iinclude -Isrc \
          -I$(BUILD)/gen
# Native fused kernels (Note [Native kernels] in src/exec/fusion_cc.c) are
# compiled at run time with the release build's floating-point flags, so
# their values equal the tile kernels' (the sanitizer builds' -O1 tiles
# compute the same values: no contraction, no fast-math in either). The
# -march of the CPU level in use is added at run time (fusion_cc.c).
NATIVE_CFLAGS := -std=c11 -O2 -fvect-cost-model=dynamic $(FP_FLAGS)
LDFLAGS := $(OPT) -fopenmp
LIBS := -lopenblas -ljansson -lz -lm $(MPI_LIBS)

# Layers in order; a layer may include only the headers of the ones before it.
LAYERS := core ops autograd ir lazy passes exec dist nn
LIB_SRC := $(foreach l,$(LAYERS),$(sort $(wildcard src/$(l)/*.c)))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := tests/test_main.c $(sort $(wildcard tests/*/*.c))
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
TOOL_SRC := $(sort $(wildcard tools/*.c))
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/%.o)
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/%.o)
# The benchmark driver without bench_kiln's main, linked into `kiln bench`.
BENCH_LIB_OBJ := $(filter-out $(BUILD)/bench/bench_kiln.o,$(BENCH_OBJ))

# The version: include/kiln.h's KILN_VERSION_* macros are its one source.
VERSION := $(shell sed -n 's/^\#define KILN_VERSION_STRING "\(.*\)"/\1/p' include/kiln.h)
SO_MAJOR := $(firstword $(subst ., ,$(VERSION)))
SO_NAME := libkiln.so.$(SO_MAJOR)
SO_REAL := libkiln.so.$(VERSION)

.PHONY: test-mpi
.PHONY: all test test-python bench check run install uninstall clean deps deps-test bench-compare fuzz coverage \
        fuzz-run fuzz-sweep fuzz-sweep-run FORCE

all: $(BUILD)/libkiln.a $(BUILD)/$(SO_REAL) $(BUILD)/kiln $(BUILD)/logreg


# Objects depend on the compiler command: changing CFLAGS (or SAN, OPT)
# rebuilds everything instead of linking stale objects.
FLAGS_STAMP := $(BUILD)/cflags.txt
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS)' > $@
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo CC $<
	@$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# src/ops/vmath.h as a C string literal, for the native kernels' source.
$(BUILD)/gen/vmath_text.h: src/ops/vmath.h
	@mkdir -p $(dir $@)
	@sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@
$(BUILD)/src/exec/fusion_cc.o: $(BUILD)/gen/vmath_text.h
$(BUILD)/src/exec/fusion_cc.o: CFLAGS += -DKILN_NATIVE_CFLAGS='"$(NATIVE_CFLAGS)"'
$(BUILD)/src/dist/comm.o: CFLAGS += $(MPI_CFLAGS)

# The archive holds ONE relocatable object (ld -r of all of kiln's), so a
# program that links it gets every op the table points at, including ops it
# never calls by name (an IR graph may): the table's entries are weak
# references (Note [Weak entries] in src/ops/table.c), which would not pull
# separate archive members in. kiln's own programs link the objects.
$(BUILD)/libkiln.a: $(LIB_OBJ)
	@rm -f $@ $(BUILD)/kiln_all.o
	ld -r -o $(BUILD)/kiln_all.o $^
	ar rcs $@ $(BUILD)/kiln_all.o

# The shared library: soname libkiln.so.MAJOR; only KILN_API functions
# (all named kiln_*) are exported, by visibility and by src/kiln.map.
# src/core/wait_policy.c (a .preinit_array re-exec) is for executables only.
SO_OBJ := $(filter-out $(BUILD)/src/core/wait_policy.o,$(LIB_OBJ))
$(BUILD)/$(SO_REAL): $(SO_OBJ) src/kiln.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(SO_NAME) -Wl,--version-script=src/kiln.map \
	  $(NO_UNDEFINED) -o $@ $(SO_OBJ) $(LIBS)
	ln -sf $(SO_REAL) $(BUILD)/$(SO_NAME)
	ln -sf $(SO_NAME) $(BUILD)/libkiln.so

$(BUILD)/kiln: $(TOOL_OBJ) $(BENCH_LIB_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/logreg: $(BUILD)/examples/logreg.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/test_kiln: $(TEST_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/bench_kiln: $(BENCH_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

# TSAN=1: libarcher (LLVM's OpenMP tool for TSAN), which asks for
# ignore_noninstrumented_modules (libomp, OpenBLAS and the native kernels
# are not instrumented), and scripts/tsan.supp; a report fails the run
# (exit code 66). KMP_BLOCKTIME=1: libomp's idle workers spin 1 ms, as
# kiln's GOMP_SPINCOUNT bounds libgomp's (Note [Thread waits]).
ifeq ($(TSAN),1)
  TEST_ENV := OMP_TOOL_LIBRARIES=$(firstword $(wildcard /usr/lib/llvm-*/lib/libarcher.so)) \
    KMP_BLOCKTIME=1 TSAN_OPTIONS="suppressions=$(CURDIR)/scripts/tsan.supp \
    ignore_noninstrumented_modules=1 halt_on_error=0 exitcode=66 $(TSAN_OPTIONS)"
endif
test: deps-test
	$(MAKE) $(BUILD)/test_kiln $(BUILD)/kiln $(BUILD)/libkiln.a $(BUILD)/$(SO_REAL)
	$(TEST_ENV) OMP_NUM_THREADS=2 KILN_BIN=./$(BUILD)/kiln ./$(BUILD)/test_kiln $(FILTER)

# The Python package's tests (python/tests, pytest) against this tree's
# libkiln.so, then `pip install ./python --target` and an import of the
# installed copy; fails when numpy or pytest is missing (make test skips
# them then; .ci/run installs them: scripts/deps.sh --python).
test-python: $(BUILD)/$(SO_REAL)
	KILN_LIBRARY=$(CURDIR)/$(BUILD)/$(SO_REAL) /usr/bin/python3 -m pytest -q python/tests
	sh python/pip_test.sh

# make test-mpi (issue 18): tests/dist_mpi.c under mpirun -np 2, then the
# CLI cases of scripts/test_mpi.sh; "skipped: no MPI" without Open MPI.
$(BUILD)/test_dist: $(BUILD)/tests/test_main.o $(BUILD)/tests/dist_mpi.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

test-mpi:
	@if command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then \
	  $(MAKE) MPI=1 SAN=$(SAN) $(BUILD)-mpi/test_dist $(BUILD)-mpi/kiln && \
	  sh scripts/test_mpi.sh $(BUILD)-mpi; \
	else echo "test-mpi: skipped: no MPI"; fi

bench: $(BUILD)/bench_kiln $(if $(filter 1,$(MPI)),$(BUILD)/kiln)
	./$(BUILD)/bench_kiln
	$(if $(filter 1,$(MPI)),sh scripts/bench_dist.sh $(BUILD))

# kiln and PyTorch 1.13 (bench/torch_anchor.py) side by side, each in fresh
# processes with the same thread count and environment; THREADS="1 2"
# (default) measures both, FILTER=SUBSTR runs some workloads, ROUNDS=R
# measures R times alternating and reports each workload's best round.
bench-compare: $(BUILD)/bench_kiln
	/usr/bin/python3 scripts/bench_models.py $(BUILD)/bench-models
	KILN_BENCH_MODELS=$(BUILD)/bench-models /usr/bin/python3 scripts/bench_compare.py --kiln ./$(BUILD)/bench_kiln \
	  --threads "$(or $(THREADS),1 2)" $(if $(FILTER),--filter $(FILTER)) $(if $(ROUNDS),--rounds $(ROUNDS))

# Fuzzing (libFuzzer, clang): each target of fuzz/ runs FUZZ_TIME seconds
# (default 60) from its seeds; new inputs collect in build-fuzz/corpus/, a
# crash leaves its input in build-fuzz/ and fails the target.
FUZZ_TARGETS := ir run npy safetensors idx checkpoint cli lazy exec
FUZZ_TIME ?= 60
# FUZZ_OOM=1: each input also runs with an allocation failing (fuzz/fuzz_oom.h)
FUZZ_OOM ?= 0
FUZZ_SEEDS_ir := tests/data/ir
FUZZ_SEEDS_run := tests/data/ir fuzz/seeds/run
FUZZ_SEEDS_npy := fuzz/seeds/npy tests/data/npy
FUZZ_SEEDS_safetensors := fuzz/seeds/safetensors
FUZZ_SEEDS_idx := fuzz/seeds/idx
FUZZ_SEEDS_checkpoint := fuzz/seeds/checkpoint
FUZZ_SEEDS_cli := fuzz/seeds/cli
FUZZ_SEEDS_lazy := fuzz/seeds/lazy
FUZZ_SEEDS_exec := fuzz/seeds/exec

fuzz:
	@sh scripts/deps.sh --fuzz
	$(MAKE) FUZZ=1 fuzz-run

$(BUILD)/fuzz_%: $(BUILD)/fuzz/fuzz_%.o $(LIB_OBJ)
	@echo LD $@
	@$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LIBS)
.SECONDARY: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%.o)

fuzz-run: $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)/corpus/$$t && \
	  echo "fuzz: $$t for $(FUZZ_TIME) s" && \
	  KILN_FUZZ_OOM=$(FUZZ_OOM) ./$(BUILD)/fuzz_$$t -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=4096 \
	    -artifact_prefix=$(BUILD)/$$t- -print_final_stats=1 \
	    $(BUILD)/corpus/$$t $$(case $$t in ir) echo $(FUZZ_SEEDS_ir);; run) echo $(FUZZ_SEEDS_run);; npy) echo $(FUZZ_SEEDS_npy);; \
	      safetensors) echo $(FUZZ_SEEDS_safetensors);; idx) echo $(FUZZ_SEEDS_idx);; \
	      checkpoint) echo $(FUZZ_SEEDS_checkpoint);; cli) echo $(FUZZ_SEEDS_cli);; \
	      lazy) echo $(FUZZ_SEEDS_lazy);; exec) echo $(FUZZ_SEEDS_exec);; esac) \
	    2>&1 | grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|ERROR|SUMMARY|Test unit" ; \
	  [ -z "$$(ls $(BUILD)/$$t-* 2>/dev/null)" ] || { echo "fuzz: $$t crashed: $$(ls $(BUILD)/$$t-*)"; exit 1; }; \
	done

# Allocation-failure sweep (fuzz/fuzz_oom.h, KILN_FUZZ_OOM=all): each
# target of FUZZ_SWEEP_TARGETS runs over its seed files, each file once per
# allocation it makes with that allocation failing; a crash, a sanitizer
# report or a failure without a message fails the target (its log is
# build-fuzz/sweep-TARGET.log).
FUZZ_SWEEP_TARGETS ?= cli npy safetensors idx checkpoint lazy
fuzz-sweep:
	@sh scripts/deps.sh --fuzz
	$(MAKE) FUZZ=1 fuzz-sweep-run

fuzz-sweep-run: $(FUZZ_SWEEP_TARGETS:%=$(BUILD)/fuzz_%)
	@$(foreach t,$(FUZZ_SWEEP_TARGETS),echo "fuzz-sweep: $(t) over $$(find $(FUZZ_SEEDS_$(t)) -type f | wc -l) seeds" && \
	  { find $(FUZZ_SEEDS_$(t)) -type f | sort | KILN_FUZZ_OOM=all xargs ./$(BUILD)/fuzz_$(t) -timeout=600 \
	      -rss_limit_mb=4096 > $(BUILD)/sweep-$(t).log 2>&1 || \
	    { tail -40 $(BUILD)/sweep-$(t).log; echo "fuzz-sweep: $(t) failed"; exit 1; }; } && ) true

# Coverage (gcov + lcov): an instrumented build in build-cov/, make test's
# suite on it, then line and branch coverage per layer and overall
# (scripts/coverage.sh; the lcov report is build-cov/coverage.info).
coverage:
	@sh scripts/deps.sh --coverage
	$(MAKE) COV=1 build-cov/test_kiln build-cov/kiln
	@find build-cov -name '*.gcda' -delete
	-OMP_NUM_THREADS=2 KILN_BIN=./build-cov/kiln ./build-cov/test_kiln $(FILTER) | tail -3
	sh scripts/coverage.sh build-cov

# The main job: train the Fashion-MNIST MLP for 2 epochs in lazy mode (as
# fast as eager here, and it runs the whole compiler), saving a checkpoint
# and a plot of the curves.
run: deps
	$(MAKE) all
	./$(BUILD)/kiln train --model mlp --mode lazy --epochs 2 \
	    --save kiln-mlp.safetensors --plot kiln-mlp.svg

deps:
	@sh scripts/deps.sh

# Layering: a file in src/<layer>/ may include only its own layer's and
# lower layers' headers. Also: file length, no includes from tests/, hook
# variables assigned only where Note [Hooks] (src/core/core.h) says.
check:
	@sh scripts/check_layers.sh $(LAYERS)
	@sh scripts/check_files.sh 1000
	@sh scripts/check_hooks.sh

# make install PREFIX=/usr/local DESTDIR=: both libraries (with the .so's
# symlinks), the header, kiln.pc, the kiln command, its man page and the
# Python package (python/kiln, when python3 is there; PYTHON= to skip).
# make uninstall removes exactly what install wrote.
LIBDIR := $(PREFIX)/lib
PYTHON ?= $(shell command -v /usr/bin/python3 || command -v python3)
# Debian's sys.path: /usr/lib/python3/dist-packages for PREFIX=/usr,
# <prefix>/lib/python3.X/dist-packages for other prefixes (/usr/local).
PYVER = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYDIR = $(if $(filter /usr,$(PREFIX)),$(LIBDIR)/python3/dist-packages,$(LIBDIR)/python$(PYVER)/dist-packages)
INSTALLED := $(PREFIX)/include/kiln.h $(LIBDIR)/libkiln.a $(LIBDIR)/$(SO_REAL) \
             $(LIBDIR)/$(SO_NAME) $(LIBDIR)/libkiln.so $(LIBDIR)/pkgconfig/kiln.pc \
             $(PREFIX)/bin/kiln $(PREFIX)/share/man/man1/kiln.1
install: $(BUILD)/libkiln.a $(BUILD)/$(SO_REAL) $(BUILD)/kiln
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/bin \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 include/kiln.h $(DESTDIR)$(PREFIX)/include/kiln.h
	install -m 644 $(BUILD)/libkiln.a $(DESTDIR)$(LIBDIR)/libkiln.a
	install -m 755 $(BUILD)/$(SO_REAL) $(DESTDIR)$(LIBDIR)/$(SO_REAL)
	ln -sf $(SO_REAL) $(DESTDIR)$(LIBDIR)/$(SO_NAME)
	ln -sf $(SO_NAME) $(DESTDIR)$(LIBDIR)/libkiln.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' kiln.pc.in \
	  > $(DESTDIR)$(LIBDIR)/pkgconfig/kiln.pc
	install -m 755 $(BUILD)/kiln $(DESTDIR)$(PREFIX)/bin/kiln
	install -m 644 doc/kiln.1 $(DESTDIR)$(PREFIX)/share/man/man1/kiln.1
	@if [ -n "$(PYTHON)" ] && [ -d python/kiln ]; then \
	  sh python/install.sh "$(PYTHON)" "$(DESTDIR)$(PYDIR)" "$(LIBDIR)"; fi

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	@if [ -n "$(PYTHON)" ] && [ -f $(DESTDIR)$(PYDIR)/kiln/_libpath.py ]; then \
	  rm -rf $(DESTDIR)$(PYDIR)/kiln; fi

clean:
	rm -rf build build-san build-fuzz build-cov build-tsan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

deps-test:
	@sh scripts/deps.sh --test
