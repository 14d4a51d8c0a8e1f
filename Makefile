# gpusolve - build, test, benchmark, install.
#   make                 build/gpusolve (CUDA engine included when nvcc is found)
#   make CUDA=0          CPU-only build, no CUDA toolkit needed
#   make MPI=1           also the distributed engine (mpirun -np P gpusolve ...,
#                        docs/multigpu.md): MPI_CFLAGS / MPI_LIBS default to
#                        `mpicc --showme:compile` / `--showme:link`, NCCL_CFLAGS /
#                        NCCL_LIBS to the CUDA toolkit's NCCL (CUDA=1 builds only)
#   (every target builds on all cores, JOBS=$(nproc) by default: make JOBS=1, or a
#   -jN on the command line, chooses otherwise; each command's output is printed
#   whole when it ends, and the tests themselves run one suite at a time, in order)
#   make run             build and solve the built-in example problem
#   make test            build and run every Check suite (GPU suites skip without a GPU)
#                        and the pytest suites of tests/python (scripts/batch.py, plots.py, bench/bench_setup.py --table)
#   make bench           benchmarks (scripts/bench/run krylov, i.e. scripts/bench/bench.sh)
#   make sanitize        small solves of every method under compute-sanitizer (GPU machine)
#   make fuzz            fuzz the Matrix Market reader for FUZZ_TIME seconds (clang, libFuzzer)
#   make install PREFIX=/usr/local
#   make clean
# Missing Debian packages (zlib1g-dev; check, pkg-config for tests; clang's
# libFuzzer for fuzz; pip's numpy, matplotlib, pytest for test) are installed
# when make runs as root, else make stops with the command to run; DEPS=skip
# checks nothing.

# A parallel build by default (a fresh clone's `make run` on 2 cores: 229 s
# one file at a time). GNU make 4.4 and later show a command line's -jN in
# MAKEFLAGS here, and then it is kept; in 4.3 a command line's -jN still
# overrides this one. --output-sync=target prints each target's output
# whole, so that parallel compiles do not interleave their lines.
JOBS      ?= $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
ifeq ($(filter -j%,$(MAKEFLAGS)),)
  MAKEFLAGS += -j$(JOBS) --output-sync=target
endif

PREFIX    ?= /usr/local
BUILD     ?= build
CC        ?= cc
CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)),/usr/local/cuda)
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA      ?= $(if $(wildcard $(NVCC)),1,0)
# SASS for Hopper plus PTX so that newer GPUs can JIT it.
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90

# src/ is one folder per layer (base io sparse engine krylov precond cli);
# every folder is on the include path, so includes name files, not folders.
SRC_DIRS  := $(patsubst %/,%,$(sort $(dir $(wildcard src/*/*.c src/*/*.h))))
SRC_INC   := $(SRC_DIRS:%=-I%)

CFLAGS    ?= -O2 -g
CFLAGS    += -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -fopenmp -ffp-contract=off $(SRC_INC)
LDLIBS    += -lz -lm -fopenmp
NVFLAGS   ?= -O3 -lineinfo
NVFLAGS   += -std=c++17 $(CUDA_ARCH) $(SRC_INC) -Icuda/engine -Icuda/sparse -Icuda/precond -Icuda/dist -Xcompiler -Wall,-Wextra,-Werror,-fopenmp \
             --Werror all-warnings

# MPI=1: src/dist/*_mpi.c and cuda/dist/ (NCCL) are built; MPI=0 (the default)
# builds src/dist/dist_stub.c instead and the program is the one-process one.
MPI       ?= 0
MPICC     ?= mpicc
MPI_CFLAGS ?= $(shell $(MPICC) --showme:compile 2>/dev/null || $(MPICC) -compile_info 2>/dev/null | cut -d' ' -f2-)
MPI_LIBS   ?= $(shell $(MPICC) --showme:link 2>/dev/null || $(MPICC) -link_info 2>/dev/null | cut -d' ' -f2-)
NCCL_HOME  ?= $(CUDA_HOME)
NCCL_CFLAGS ?= -I$(NCCL_HOME)/include
NCCL_LIBDIR ?= $(firstword $(dir $(wildcard $(NCCL_HOME)/lib64/libnccl.so $(NCCL_HOME)/lib/libnccl.so)) $(NCCL_HOME)/lib64)
NCCL_LIBS   ?= -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -lnccl

CHECK_CFLAGS ?= $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   ?= $(or $(shell pkg-config --libs check 2>/dev/null),-lcheck -lsubunit -lrt -lm -lpthread)

LIB_SRC  := $(filter-out src/cli/main.c src/engine/engine_cuda_stub.c src/dist/dist_stub.c,$(wildcard src/*/*.c))
ifeq ($(MPI),1)
  CFLAGS   += -DGS_HAVE_MPI=1 $(MPI_CFLAGS)
  NVFLAGS  += -DGS_HAVE_MPI=1 $(MPI_CFLAGS) $(NCCL_CFLAGS)
  LDLIBS   += $(MPI_LIBS)
else
  LIB_SRC  := $(filter-out %_mpi.c,$(LIB_SRC)) src/dist/dist_stub.c
  CFLAGS   += -DGS_HAVE_MPI=0
endif
ifeq ($(CUDA),1)
  CU_SRC   := $(wildcard cuda/*/*.cu)
  ifneq ($(MPI),1)
    CU_SRC := $(filter-out cuda/dist/%,$(CU_SRC))
  else
    LDLIBS += $(NCCL_LIBS)
  endif
  CFLAGS   += -DGS_HAVE_CUDA=1
  LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcusolver -lcusparse -lcublas -lcudart -lstdc++
else
  CU_SRC   :=
  LIB_SRC  += src/engine/engine_cuda_stub.c
  CFLAGS   += -DGS_HAVE_CUDA=0
endif
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/check_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
HEADERS  := $(wildcard src/*/*.h cuda/*/*.h cuda/*/*.cuh)
# Objects of a CUDA=1 build must not leak into a CUDA=0 build (and back):
# switching rewrites this stamp, which every object depends on.
STAMP    := $(BUILD)/config.cuda$(CUDA).mpi$(MPI)

.PHONY: all run test bench sanitize install clean
all: $(BUILD)/gpusolve

# ---- Debian packages each step needs (scripts/dev/deps.sh: PACKAGE:KIND:WHAT) ----
# Order-only prerequisites: checked (in well under a second) once per make
# run before anything is compiled; they never make a file out of date.
DEPS       ?= auto
DEPS_BUILD := zlib1g-dev:header:zlib.h
DEPS_TEST  := pkg-config:command:pkg-config check:header:check.h
DEPS_FUZZ   = clang:fuzzer:$(FUZZ_CC)
DEPS_PY    := numpy:pip:numpy matplotlib:pip:matplotlib pytest:pip:pytest
deps_check  = $(if $(filter skip,$(DEPS)),@:,@CC='$(CC)' scripts/dev/deps.sh $(1))
.PHONY: deps-build deps-test deps-fuzz deps-python
deps-build: ; $(call deps_check,$(DEPS_BUILD))
deps-test: deps-build ; $(call deps_check,$(DEPS_TEST))
deps-python: ; $(call deps_check,$(DEPS_PY))
deps-fuzz: ; $(call deps_check,$(DEPS_FUZZ))

$(BUILD)/gpusolve: $(BUILD)/src/cli/main.o $(BUILD)/libgpusolve.a
	$(CC) -o $@ $^ $(LDLIBS)

$(BUILD)/libgpusolve.a: $(LIB_OBJ) $(STAMP)
	rm -f $@ && ar rcs $@ $(LIB_OBJ)

$(STAMP): | $(BUILD)/src deps-build
	rm -f $(BUILD)/config.cuda* && touch $@

$(BUILD)/src/%.o: src/%.c $(HEADERS) $(STAMP) | $(BUILD)/src deps-build
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/cuda/%.o: cuda/%.cu $(HEADERS) $(STAMP) | $(BUILD)/cuda
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c -o $@ $<
# The small dense operations of the Krylov methods round as the host's do
# (src/engine/small.h): no fused multiply-add in that kernel.
$(BUILD)/cuda/engine/small.o: NVFLAGS += -fmad=false

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/libgpusolve.a $(HEADERS) | $(BUILD)/tests deps-test
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Itests -o $@ $< $(BUILD)/libgpusolve.a $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/src $(BUILD)/cuda $(BUILD)/tests:
	mkdir -p $@

# '+' on the lines that run for long (run, test, bench, sanitize, fuzz): they
# print as they run, not held back by --output-sync until they end, as make
# does for a recursive make; make -n runs them too.
run: $(BUILD)/gpusolve
	+$(BUILD)/gpusolve --generate poisson3d:64 -p jacobi -m cg

test: $(BUILD)/gpusolve $(TEST_BIN) | deps-python
	+GPUSOLVE=$(BUILD)/gpusolve PYTEST_DIR=tests/python scripts/dev/run_tests.sh $(TEST_BIN)

bench: $(BUILD)/gpusolve
	+GPUSOLVE=$(BUILD)/gpusolve scripts/bench/run krylov

sanitize: $(BUILD)/gpusolve
	+GPUSOLVE=$(BUILD)/gpusolve scripts/dev/sanitize.sh

# ---- fuzzing: tests/fuzz_mmio.c, the Matrix Market reader under libFuzzer ----
# The reader and what it calls, built serially (no OpenMP: the fuzzer's
# inputs are far below the parallel threshold), with ASan and UBSan; new
# inputs collect in $(BUILD)/fuzz/found, crashes in $(BUILD)/fuzz/crash-*.
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 90
FUZZ_FLAGS ?= -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_SRC   := tests/fuzz_mmio.c src/io/mmio.c src/sparse/csr.c src/base/error.c
.PHONY: fuzz
$(BUILD)/fuzz/fuzz_mmio: $(FUZZ_SRC) $(HEADERS) | deps-fuzz
	mkdir -p $(BUILD)/fuzz
	$(FUZZ_CC) $(FUZZ_FLAGS) -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror \
	    -Wno-unknown-pragmas -Wno-unused-parameter -Wno-unused-variable $(SRC_INC) \
	    -o $@ $(FUZZ_SRC) -lz -lm

fuzz: $(BUILD)/fuzz/fuzz_mmio
	scripts/dev/fuzz_corpus.sh $(BUILD)/fuzz
	mkdir -p $(BUILD)/fuzz/found
	+$(BUILD)/fuzz/fuzz_mmio -max_total_time=$(FUZZ_TIME) -max_len=4096 \
	    -dict=$(BUILD)/fuzz/mmio.dict -artifact_prefix=$(BUILD)/fuzz/ -print_final_stats=1 \
	    $(BUILD)/fuzz/found $(BUILD)/fuzz/corpus

install: $(BUILD)/gpusolve
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/gpusolve $(DESTDIR)$(PREFIX)/bin/gpusolve

clean:
	rm -rf $(BUILD)
