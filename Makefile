# gpusolve - build, test, benchmark, install.
#   make                 build/gpusolve (CUDA engine included when nvcc is found)
#   make CUDA=0          CPU-only build, no CUDA toolkit needed
#   make run             build and solve the built-in example problem
#   make test            build and run every Check suite (GPU suites skip without a GPU)
#   make bench           benchmarks (scripts/bench.sh)
#   make sanitize        small solves of every method under compute-sanitizer (GPU machine)
#   make install PREFIX=/usr/local
#   make clean

PREFIX    ?= /usr/local
BUILD     ?= build
CC        ?= cc
CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)),/usr/local/cuda)
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA      ?= $(if $(wildcard $(NVCC)),1,0)
# SASS for Hopper plus PTX so that newer GPUs can JIT it.
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90

CFLAGS    ?= -O2 -g
CFLAGS    += -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -fopenmp -Isrc
LDLIBS    += -lz -lm -fopenmp
NVFLAGS   ?= -O3 -lineinfo
NVFLAGS   += -std=c++17 $(CUDA_ARCH) -Isrc -Icuda/engine -Icuda/sparse -Icuda/precond -Xcompiler -Wall,-Wextra,-Werror,-fopenmp \
             --Werror all-warnings

CHECK_CFLAGS ?= $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   ?= $(or $(shell pkg-config --libs check 2>/dev/null),-lcheck -lsubunit -lrt -lm -lpthread)

LIB_SRC  := $(filter-out src/main.c src/engine_cuda_stub.c,$(wildcard src/*.c))
ifeq ($(CUDA),1)
  CU_SRC   := $(wildcard cuda/*/*.cu)
  CFLAGS   += -DGS_HAVE_CUDA=1
  LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcusparse -lcublas -lcudart -lstdc++
else
  CU_SRC   :=
  LIB_SRC  += src/engine_cuda_stub.c
  CFLAGS   += -DGS_HAVE_CUDA=0
endif
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/check_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
HEADERS  := $(wildcard src/*.h cuda/*/*.h cuda/*/*.cuh)
# Objects of a CUDA=1 build must not leak into a CUDA=0 build (and back):
# switching rewrites this stamp, which every object depends on.
STAMP    := $(BUILD)/config.cuda$(CUDA)

.PHONY: all run test bench sanitize install clean
all: $(BUILD)/gpusolve

$(BUILD)/gpusolve: $(BUILD)/src/main.o $(BUILD)/libgpusolve.a
	$(CC) -o $@ $^ $(LDLIBS)

$(BUILD)/libgpusolve.a: $(LIB_OBJ) $(STAMP)
	rm -f $@ && ar rcs $@ $(LIB_OBJ)

$(STAMP): | $(BUILD)/src
	rm -f $(BUILD)/config.cuda* && touch $@

$(BUILD)/src/%.o: src/%.c $(HEADERS) $(STAMP) | $(BUILD)/src
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/cuda/%.o: cuda/%.cu $(HEADERS) $(STAMP) | $(BUILD)/cuda
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c tests/testutil.h $(BUILD)/libgpusolve.a $(HEADERS) | $(BUILD)/tests
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Itests -o $@ $< $(BUILD)/libgpusolve.a $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/src $(BUILD)/cuda $(BUILD)/tests:
	mkdir -p $@

run: $(BUILD)/gpusolve
	$(BUILD)/gpusolve --generate poisson3d:64 -p jacobi -m cg

test: $(BUILD)/gpusolve $(TEST_BIN)
	GPUSOLVE=$(BUILD)/gpusolve scripts/run_tests.sh $(TEST_BIN)

bench: $(BUILD)/gpusolve
	GPUSOLVE=$(BUILD)/gpusolve scripts/bench.sh

sanitize: $(BUILD)/gpusolve
	GPUSOLVE=$(BUILD)/gpusolve scripts/sanitize.sh

install: $(BUILD)/gpusolve
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/gpusolve $(DESTDIR)$(PREFIX)/bin/gpusolve

clean:
	rm -rf $(BUILD)
