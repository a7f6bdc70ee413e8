# oomtrace — plain Makefile. `make` builds the library and launcher, `make check` runs every test,
# `make demo` runs the main job, `make bench` the benchmark suite, `make install PREFIX=...`.
PREFIX ?= /usr/local
CC ?= cc
B := build
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wundef -Wno-unused-parameter
CFLAGS ?= -O2 -g
BASE_CFLAGS := -std=gnu11 $(WARN) -fPIC -Iinclude -Iinterpose -D_GNU_SOURCE -mcx16
LIB_CFLAGS := $(BASE_CFLAGS) -fvisibility=hidden -fno-omit-frame-pointer -ftls-model=initial-exec
LIBS := -lunwind -ldl -lpthread

LIB_SRCS := $(sort $(wildcard interpose/*.c))
# The shim: files that define interposed symbols. Everything else is the core, linked into unit tests.
SHIM_SRCS := $(filter interpose/hooks_%.c,$(LIB_SRCS))
CORE_SRCS := $(filter-out $(SHIM_SRCS),$(LIB_SRCS))
LIB_OBJS := $(LIB_SRCS:interpose/%.c=$(B)/obj/%.o)
CORE_OBJS := $(CORE_SRCS:interpose/%.c=$(B)/obj/%.o)
VERSION_SCRIPT := $(wildcard interpose/liboomtrace.map)

UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/unit/%)
TARGET_SRCS := $(sort $(wildcard tests/targets/*.c))
TARGET_BINS := $(TARGET_SRCS:tests/targets/%.c=$(B)/targets/%)
EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/%.c=$(B)/examples/%)

# Unit tests that also run under ThreadSanitizer / AddressSanitizer (core rebuilt with the sanitizer).
TSAN_TESTS ?= test_table test_sites test_live test_stack test_failures
ASAN_TESTS ?= test_fmt test_options test_table test_sites test_report test_symbolize test_live test_cuda_state test_stack test_asmap test_cgstat test_symbolize_map test_recorder
TSAN_BINS := $(TSAN_TESTS:%=$(B)/tests/tsan/%)
ASAN_BINS := $(ASAN_TESTS:%=$(B)/tests/asan/%)

all: $(B)/.deps $(B)/liboomtrace.so $(B)/oomtrace

$(B)/.deps: scripts/deps.sh
	@mkdir -p $(B)
	@bash scripts/deps.sh
	@touch $@

$(B)/obj/%.o: interpose/%.c interpose/*.h include/*.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) -c $< -o $@

$(B)/liboomtrace.so: $(LIB_OBJS) $(VERSION_SCRIPT)
	$(CC) -shared -o $@ $(LIB_OBJS) $(if $(VERSION_SCRIPT),-Wl$(comma)--version-script=$(VERSION_SCRIPT)) \
	    -Wl,-z,nodelete -Wl,--no-undefined $(LIBS)

comma := ,

$(B)/libcore.a: $(CORE_OBJS)
	@rm -f $@
	ar rcs $@ $^

# The launcher: its own files, and from the core the report writers and the symbolizer (one for
# the library and the tools), linked from the archive (postmortem.c defines what init.c would).
LAUNCHER_SRCS := $(sort $(wildcard launcher/*.c))
$(B)/oomtrace: $(LAUNCHER_SRCS) launcher/*.h include/oomtrace.h interpose/*.h $(B)/libcore.a | $(B)/.deps
	$(CC) -std=gnu11 $(WARN) -Iinclude -Iinterpose -Ilauncher -D_GNU_SOURCE $(CFLAGS) \
	    -DOT_LIBDIR='"$(PREFIX)/lib"' $(LAUNCHER_SRCS) -o $@ $(B)/libcore.a $(LIBS)

$(B)/tests/unit/%: tests/unit/%.c tests/unit/*.h interpose/*.h include/*.h $(B)/libcore.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(TEST_DEFS) $< $(TEST_SRCS) -o $@ $(B)/libcore.a $(LIBS)

# test_mathx compares mathx.c with libm, which the library itself does not link.
$(B)/tests/unit/test_mathx: LIBS += -lm

# test_table parks an insert inside table.c's late-insert window: it links its own build of
# table.c with that hook (the library's has none); the archive's table.o is then not pulled in.
$(B)/tests/unit/test_table: TEST_SRCS := interpose/table.c
$(B)/tests/unit/test_table: interpose/table.c
$(B)/tests/unit/test_table $(B)/tests/tsan/test_table $(B)/tests/asan/test_table: TEST_DEFS := -DOT_TABLE_TEST_HOOKS

# Unit tests of the launcher's own files: built with them (they are not in the core).
$(B)/tests/unit/test_oomkill: TEST_SRCS := launcher/oomkill.c
$(B)/tests/unit/test_oomkill: TEST_DEFS := -Ilauncher
$(B)/tests/unit/test_oomkill: launcher/oomkill.c launcher/launcher.h

# test_recorder reads the recorder's files through the launcher's reader, the one the tools use.
$(B)/tests/unit/test_recorder: TEST_SRCS := launcher/statefile.c
$(B)/tests/unit/test_recorder: TEST_DEFS := -Ilauncher
$(B)/tests/unit/test_recorder: launcher/statefile.c launcher/statefile.h
$(B)/tests/asan/test_recorder: tests/unit/test_recorder.c tests/unit/*.h $(CORE_SRCS) launcher/statefile.c interpose/*.h include/*.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -DOT_SANITIZER=1 \
	    -Ilauncher $< launcher/statefile.c $(CORE_SRCS) -o $@ $(LIBS)

# Sanitizer builds compile the core sources straight into the test.
$(B)/tests/tsan/%: tests/unit/%.c tests/unit/*.h $(CORE_SRCS) interpose/*.h include/*.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g -fsanitize=thread -DOT_SANITIZER=1 $(TEST_DEFS) $< $(CORE_SRCS) -o $@ $(LIBS)

$(B)/tests/asan/%: tests/unit/%.c tests/unit/*.h $(CORE_SRCS) interpose/*.h include/*.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	    -DOT_SANITIZER=1 $(TEST_DEFS) $< $(CORE_SRCS) -o $@ $(LIBS)

# Targets: tiny programs run under the preload. Built with debug info but no -rdynamic, so their
# own function names must come from the symbol table, as in real binaries.
$(B)/targets/%: tests/targets/%.c tests/targets/*.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O1 -g -Wall -Iinclude $< -o $@ -lpthread -ldl

$(B)/examples/%: examples/%.c include/oomtrace.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O1 -g -Wall -Iinclude $< -o $@ -lpthread -ldl

-include $(wildcard tests/*/*.mk)

TEST_BINS = $(UNIT_BINS) $(TSAN_BINS) $(ASAN_BINS) $(TARGET_BINS) $(EXAMPLE_BINS) $(EXTRA_TEST_BINS)

tests: all $(TEST_BINS)

check: tests
	@bash tests/run.sh

demo: all $(B)/examples/host_oom $(B)/examples/grow_oom $(EXTRA_DEMO_BINS)
	@bash scripts/demo.sh

bench: all
	@bash scripts/bench.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(B)/liboomtrace.so $(DESTDIR)$(PREFIX)/lib/liboomtrace.so
	install -m 0755 $(B)/oomtrace $(DESTDIR)$(PREFIX)/bin/oomtrace
	install -m 0644 include/oomtrace.h $(DESTDIR)$(PREFIX)/include/oomtrace.h

clean:
	rm -rf $(B)

.PHONY: all tests check demo bench install clean
.SECONDARY:
