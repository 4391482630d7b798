# hakmem — build, test and benchmark.
#   make                 libraries in build/ (libhakmem.so, libhakmem.a)
#   make test            build and run every test (release, then the same tests in the debug and hardened builds)
#   make bench           build everything and run the benchmark comparison (hakmem vs glibc and peers)
#   make DEBUG=1         invariant checks on (build-debug/)
#   make SAN=undefined   UBSan build (build-ubsan/); SAN=thread: TSan, hak_ API only (build-tsan/)
#   make SAN=address     ASan poisons the hak_ API's free blocks (build-asan/; src/track.h)
#   make VALGRIND=1      memcheck sees every block (build-valgrind/; src/track.h)
#   make L2_RING=128 L25_RING=16  per-pool ring capacities (build maximums)
#   make HARDENED=1      hardened mode (build-hardened/): encoded, checked free-list links, guard pages,
#                        random carve order, delayed reuse (README, "Hardened mode")
#   make FAST_STATS=1    count fast-path hits too (on in DEBUG builds)
#   make PORTABLE=1      the fast path's portable C twin instead of the x86-64 glibc form (src/prim.h; build-portable/)
#   make install PREFIX=/usr/local   (with the CMake config and the man page; DESTDIR too)
#   make deb             Debian package build-deb/hakmem_VERSION_ARCH.deb (dpkg-deb; DEB_DIR=...)
#   make test-aarch64    cross-build into build-aarch64/ and run the tests under qemu-user
#   make test-clang      the library and the tests built with clang (build-clang/), then the tests
#   make test-musl       the library and its C tests built for musl (musl-gcc; release, debug, hardened)
#   make fuzz            the differential fuzzer, FUZZ_SECONDS=60 (random seeds; libFuzzer too with clang)

CC       ?= cc
CXX      ?= c++
PREFIX   ?= /usr/local
DEBUG    ?= 0
SAN      ?=
FAST_STATS ?= $(DEBUG)
L2_RING  ?= 128
L25_RING ?= 16
PORTABLE ?= 0
VALGRIND ?= 0
HARDENED ?= 0
PORT_SUFFIX := $(if $(filter 1,$(PORTABLE)),-portable)
VERSION   := 0.1.0
SOVERSION := 0

ifeq ($(SAN),)
  ifeq ($(DEBUG),1)
    BUILD ?= build-debug$(PORT_SUFFIX)$(if $(filter 1,$(VALGRIND)),-valgrind)
  else ifeq ($(HARDENED),1)
    BUILD ?= build-hardened$(PORT_SUFFIX)
  else
    BUILD ?= $(if $(filter 1,$(VALGRIND)),build-valgrind,build$(PORT_SUFFIX))
  endif
else
  BUILD ?= build-$(SAN:undefined=ubsan)
endif
BUILD := $(patsubst build-thread,build-tsan,$(patsubst build-address,build-asan,$(BUILD)))

OPT      := -O2
ifeq ($(DEBUG),1)
  OPT    := -O1 -DHAK_DEBUG=1
endif
# Another C library than glibc (musl) has no backtrace(): the heap profiler
# walks frame pointers there (src/prof.c), so the library keeps them (the
# inline fast paths set up no frame either way: 47 instructions a pair).
LIBC_GLIBC := $(shell echo __GLIBC__ | $(CC) -include limits.h -E -P -x c - 2>/dev/null | tail -n 1)
LIBC_FLAGS := $(if $(filter __GLIBC__,$(LIBC_GLIBC)),-fno-omit-frame-pointer)
SANFLAGS :=
ifneq ($(SAN),)
  SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer
  ifeq ($(SAN),undefined)
    SANFLAGS += -fno-sanitize-recover=undefined
  endif
endif
# The TSan and ASan builds leave malloc alone (the sanitizer owns it) and are
# used through the hak_ API.
OVERRIDE ?= $(if $(filter thread address,$(SAN)),0,1)
# What a memory checker is told of blocks (src/track.h): 1 Valgrind, 2 ASan.
# The ASan build's library is not instrumented (it touches its free blocks,
# which are poisoned): it calls ASan's poisoning, and programs link ASan.
TRACK    := $(if $(filter address,$(SAN)),2,$(if $(filter 1,$(VALGRIND)),1,0))
SANFLAGS_LIB := $(if $(filter address,$(SAN)),,$(SANFLAGS))

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS_LIB := -std=c11 -D_GNU_SOURCE $(OPT) $(LIBC_FLAGS) -g -fPIC $(WARN) -fvisibility=hidden \
  -ftls-model=initial-exec -fno-semantic-interposition -fno-strict-aliasing \
  -fno-stack-protector -fno-plt -fexceptions -fno-tree-slp-vectorize -Iinclude -Isrc $(SANFLAGS_LIB) \
  -DPOOL_L2_RING_CAP=$(L2_RING) -DPOOL_L25_RING_CAP=$(L25_RING) \
  -DHAK_FAST_STATS=$(FAST_STATS) -DHAK_OVERRIDE=$(OVERRIDE) -DHAK_PORTABLE=$(PORTABLE) -DHAK_TRACK=$(TRACK) -DHAK_HARDENED=$(HARDENED)
LIB_SRCS := src/lock.c src/os.c src/class.c src/region.c src/superslab.c src/slab.c src/refill.c \
  src/front.c src/span.c src/large.c src/heap.c src/purge.c src/thread.c src/options.c src/stats.c \
  src/guard.c src/prof.c src/api.c
ifeq ($(OVERRIDE),1)
  LIB_SRCS += src/override.c
endif
# The shared library's objects are built apart from the static library's: the
# free key differs (hakmem_internal.h, HAK_FREE_KEY).
LIB_OBJS := $(LIB_SRCS:src/%.c=$(BUILD)/obj/%.o)
SO_OBJS  := $(LIB_SRCS:src/%.c=$(BUILD)/obj-so/%.o)
LIB_HDRS := include/hakmem.h $(wildcard src/*.h)

.PHONY: all lib test test-sanitizers test-aarch64 test-clang test-musl bench install deb clean tests benches fuzz
all: lib
lib: $(BUILD)/libhakmem.so $(BUILD)/libhakmem.a

$(BUILD)/obj/%.o: src/%.c $(LIB_HDRS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_LIB) -c $< -o $@
$(BUILD)/obj-so/%.o: src/%.c $(LIB_HDRS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_LIB) -DHAK_SHARED_LIB=1 -c $< -o $@

$(BUILD)/libhakmem.so: $(SO_OBJS)
	$(CC) -shared -o $@ $(SO_OBJS) $(SANFLAGS) -Wl,-z,nodelete -Wl,-soname,libhakmem.so.$(SOVERSION) -lpthread -ldl
	ln -sf libhakmem.so $(BUILD)/libhakmem.so.$(SOVERSION)
$(BUILD)/libhakmem.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $(LIB_OBJS)

# ---- tests --------------------------------------------------------------
# Tests that look inside (test_hakapi_*) see the library's build settings.
CFLAGS_TEST := -std=gnu11 -D_GNU_SOURCE -O1 -g $(WARN) -Wno-missing-prototypes -Iinclude -Isrc $(SANFLAGS) \
  -DPOOL_L2_RING_CAP=$(L2_RING) -DPOOL_L25_RING_CAP=$(L25_RING) -DHAK_FAST_STATS=$(FAST_STATS) -DHAK_DEBUG=$(DEBUG) -DHAK_PORTABLE=$(PORTABLE) -DHAK_HARDENED=$(HARDENED) \
  -DHAK_TRACK=$(TRACK) \
  -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
TEST_CXX  := $(wildcard tests/test_*.cc)
TEST_CXX_BINS := $(TEST_CXX:tests/%.cc=$(BUILD)/tests/%)
PLAIN_SRCS := $(wildcard tests/plain_*.c)
PLAIN_BINS := $(PLAIN_SRCS:tests/%.c=$(BUILD)/tests/%)
PLAIN_CXX  := $(wildcard tests/plain_*.cc)
PLAIN_CXX_BINS := $(PLAIN_CXX:tests/%.cc=$(BUILD)/tests/%)
SHIM_SRCS := $(wildcard tests/shim_*.c)
SHIM_LIBS := $(SHIM_SRCS:tests/%.c=$(BUILD)/tests/%.so)
tests: lib $(TEST_BINS) $(TEST_CXX_BINS) $(PLAIN_BINS) $(PLAIN_CXX_BINS) $(SHIM_LIBS) benches

# Tests link the shared library (the -lhakmem path); tests named test_hakapi_* link
# the static one and use only the hak_ API (that is what the TSan build runs).
$(BUILD)/tests/test_hakapi_%: tests/test_hakapi_%.c $(BUILD)/libhakmem.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_TEST) $< -o $@ $(BUILD)/libhakmem.a -lpthread
$(BUILD)/tests/test_%: tests/test_%.c $(BUILD)/libhakmem.so $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_TEST) $< -o $@ -L$(BUILD) -Wl,-rpath,'$$ORIGIN/..' -lhakmem -lpthread -ldl
# plain_* programs never link hakmem: script tests run them with and without LD_PRELOAD.
$(BUILD)/tests/plain_%: tests/plain_%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O1 $(LIBC_FLAGS) -g -Wall -Wextra -Iinclude $< -o $@ -lpthread -ldl
# The fuzzer's engine is a header shared by test_fuzz, plain_fuzz and the libFuzzer target.
$(BUILD)/tests/plain_fuzz: tests/fuzz_engine.h
# shim_* libraries are preloaded in front of hakmem by script tests.
$(BUILD)/tests/shim_%.so: tests/shim_%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -Wall -Wextra -fPIC -shared $< -o $@
$(BUILD)/tests/plain_%: tests/plain_%.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -g -Wall -Wextra -fsized-deallocation -faligned-new $< -o $@ -lpthread

test: tests
	@sh tests/run.sh $(BUILD)
ifeq ($(DEBUG)$(SAN)$(HARDENED),00)
	@$(MAKE) --no-print-directory DEBUG=1 tests
	@sh tests/run.sh build-debug$(PORT_SUFFIX)
	@$(MAKE) --no-print-directory HARDENED=1 tests
	@sh tests/run.sh build-hardened$(PORT_SUFFIX)
endif

# UBSan on the library and every test; TSan on the multi-threaded hak_ API tests;
# ASan (the hak_ API's blocks poisoned, src/track.h) on the hak_ API tests and
# tests/test_asan.sh.
test-sanitizers:
	@$(MAKE) --no-print-directory SAN=undefined tests
	@sh tests/run.sh build-ubsan
	@$(MAKE) --no-print-directory SAN=thread lib $(patsubst tests/%.c,build-tsan/tests/%,$(wildcard tests/test_hakapi_*.c))
	@sh tests/run.sh build-tsan
	@$(MAKE) --no-print-directory SAN=address lib $(patsubst tests/%.c,build-asan/tests/%,$(wildcard tests/test_hakapi_*.c)) \
	  build-asan/tests/plain_track_clean
	@sh tests/run.sh build-asan

# aarch64 under qemu-user (Debian: gcc-aarch64-linux-gnu g++-aarch64-linux-gnu
# qemu-user libc6-dev-arm64-cross): tests/run.sh names and skips what qemu cannot run.
AARCH64_CC   ?= aarch64-linux-gnu-gcc
AARCH64_CXX  ?= aarch64-linux-gnu-g++
AARCH64_QEMU ?= qemu-aarch64 -L /usr/aarch64-linux-gnu
test-aarch64:
	@$(MAKE) --no-print-directory CC=$(AARCH64_CC) CXX=$(AARCH64_CXX) BUILD=build-aarch64 tests
	@HAK_TEST_EMULATOR='$(AARCH64_QEMU)' sh tests/run.sh build-aarch64

# The release build with clang (Debian: clang): its warnings, and what the
# tests' programs meet under another optimizer (omitted new-expressions, a
# read of errno folded across malloc, functions inlined into profiled sites).
CLANG_CC  ?= clang
CLANG_CXX ?= clang++
test-clang:
	@$(MAKE) --no-print-directory CC=$(CLANG_CC) CXX=$(CLANG_CXX) BUILD=build-clang tests
	@HAK_TEST_CC=$(CLANG_CC) sh tests/run.sh build-clang

# musl (Debian: musl-tools; Alpine's C library): the library, the C tests
# (they link it: malloc and the rest replaced in a musl process), the
# fuzzer's plain program (test_fuzz_preload.sh: LD_PRELOAD in a musl
# process, and musl's own malloc against the fuzzer's model) and the
# profiler's (test_prof.py, frame pointers). musl-gcc builds no C++, and
# the other script tests run the host's glibc programs: tests/run.sh names
# them and skips them.
MUSL_CC ?= musl-gcc
MUSL_BUILDS := build-musl:DEBUG=0 build-musl-debug:DEBUG=1 build-musl-hardened:HARDENED=1
test-musl:
	@for b in $(MUSL_BUILDS); do dir=$${b%%:*}; \
	  $(MAKE) --no-print-directory CC=$(MUSL_CC) BUILD=$$dir $${b#*:} lib \
	    $(patsubst tests/%.c,$$dir/tests/%,$(TEST_SRCS)) $$dir/tests/plain_fuzz $$dir/tests/plain_prof && \
	  HAK_TEST_LIBC=musl HAK_TEST_CC=$(MUSL_CC) sh tests/run.sh $$dir || exit 1; done

# ---- fuzzing ------------------------------------------------------------------
# make fuzz: the differential fuzzer (tests/fuzz_engine.h) for FUZZ_SECONDS with
# random seeds, linked, under LD_PRELOAD and, where clang is installed, under
# libFuzzer (hakmem's sources compiled into the target with coverage).
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_TARGET := $(if $(shell command -v $(FUZZ_CC) 2>/dev/null),$(BUILD)/fuzz/fuzz_libfuzzer)
fuzz: lib $(BUILD)/tests/test_fuzz $(BUILD)/tests/plain_fuzz $(FUZZ_TARGET)
	@sh tests/fuzz_run.sh $(BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGET)
$(BUILD)/fuzz/fuzz_libfuzzer: tests/fuzz_libfuzzer.c tests/fuzz_engine.h tests/fuzz_linked.h $(LIB_SRCS) src/override.c $(LIB_HDRS) Makefile
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=gnu11 -D_GNU_SOURCE $(OPT) -g -fsanitize=fuzzer $(WARN) -Wno-missing-prototypes -Iinclude -Isrc \
	  -fvisibility=hidden -ftls-model=initial-exec -fno-strict-aliasing -fexceptions \
	  -DPOOL_L2_RING_CAP=$(L2_RING) -DPOOL_L25_RING_CAP=$(L25_RING) -DHAK_FAST_STATS=$(FAST_STATS) -DHAK_OVERRIDE=1 \
	  $(sort $(LIB_SRCS) src/override.c) tests/fuzz_libfuzzer.c -o $@ -lpthread

# ---- benchmarks -----------------------------------------------------------
# Benchmark programs never link hakmem: the allocator is chosen by LD_PRELOAD.
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
BENCH_CXX_SRCS := $(wildcard bench/*.cc)
BENCH_CXX_BINS := $(BENCH_CXX_SRCS:bench/%.cc=$(BUILD)/bench/%)
benches: $(BENCH_BINS) $(BENCH_CXX_BINS)
$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -fno-builtin-malloc -fno-builtin-free $< -o $@ -lpthread -lm
$(BUILD)/bench/%: bench/%.cc $(wildcard bench/*.h)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -D_GNU_SOURCE -O2 -g -Wall -Wextra -fno-builtin-malloc -fno-builtin-free $< -o $@ -lpthread -lm

# Both suites (bench/ programs and the program suite), then instructions per malloc+free pair.
bench: lib benches
	@status=0; python3 tools/hakmem bench --build $(BUILD) || status=$$?; \
	  python3 tools/hakmem pairs --build $(BUILD) || status=$$?; exit $$status

# ---- install ----------------------------------------------------------------
# PREFIX/lib: libhakmem.so.VERSION with the SONAME libhakmem.so.SOVERSION and both
# links, libhakmem.a; include/hakmem.h; pkg-config and CMake (lib/cmake/hakmem)
# files; bin/hakmem with its package in lib/hakmem/; share/man/man1/hakmem.1.gz.
LIBDIR := $(DESTDIR)$(PREFIX)/lib
CMAKEDIR := $(LIBDIR)/cmake/hakmem
SUBST := sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@SOVERSION@|$(SOVERSION)|'
install: lib
	install -d $(LIBDIR)/pkgconfig $(LIBDIR)/hakmem/hakmem_tool $(CMAKEDIR) \
	  $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(BUILD)/libhakmem.a $(LIBDIR)/
	install -m 755 $(BUILD)/libhakmem.so $(LIBDIR)/libhakmem.so.$(VERSION)
	ln -sf libhakmem.so.$(VERSION) $(LIBDIR)/libhakmem.so.$(SOVERSION)
	ln -sf libhakmem.so.$(SOVERSION) $(LIBDIR)/libhakmem.so
	install -m 644 include/hakmem.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 tools/hakmem $(DESTDIR)$(PREFIX)/bin/hakmem
	install -m 644 tools/hakmem_tool/*.py $(LIBDIR)/hakmem/hakmem_tool/
	$(SUBST) hakmem.pc.in > $(LIBDIR)/pkgconfig/hakmem.pc
	$(SUBST) packaging/hakmemConfig.cmake.in > $(CMAKEDIR)/hakmemConfig.cmake
	$(SUBST) packaging/hakmemConfigVersion.cmake.in > $(CMAKEDIR)/hakmemConfigVersion.cmake
	gzip -9n < packaging/hakmem.1 > $(DESTDIR)$(PREFIX)/share/man/man1/hakmem.1.gz
	chmod 644 $(DESTDIR)$(PREFIX)/share/man/man1/hakmem.1.gz

# A Debian package from a staged tree (make install DESTDIR=... PREFIX=/usr).
DEB_ARCH  ?= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_DIR   ?= build-deb
DEB_STAGE := $(DEB_DIR)/stage
deb:
	rm -rf $(DEB_STAGE)
	@$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEB_STAGE)) PREFIX=/usr
	install -d $(DEB_STAGE)/DEBIAN $(DEB_STAGE)/usr/share/doc/hakmem
	install -m 644 README.md $(DEB_STAGE)/usr/share/doc/hakmem/
	install -m 644 packaging/triggers $(DEB_STAGE)/DEBIAN/triggers
	$(SUBST) -e 's|@ARCH@|$(DEB_ARCH)|' -e "s|@SIZE@|$$(du -sk --exclude=DEBIAN $(DEB_STAGE) | cut -f1)|" \
	  packaging/control.in > $(DEB_STAGE)/DEBIAN/control
	dpkg-deb --root-owner-group --build $(DEB_STAGE) $(DEB_DIR)/hakmem_$(VERSION)_$(DEB_ARCH).deb

clean:
	rm -rf build build-debug build-ubsan build-tsan build-aarch64 build-deb build-portable \
	  build-debug-portable build-valgrind build-debug-valgrind build-asan build-hardened build-hardened-portable
