# Benchmark workloads (make bench, scripts/bench.sh): built into build/bench/ with -O2 -g, never part
# of `make check`. Included by the top Makefile through -include $(wildcard tests/*/*.mk).
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(B)/bench/%)
# report_1m relies on 16 look-alike functions keeping distinct addresses: no identical-code folding.
BENCH_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Iinclude -fno-ipa-icf

# One recipe for every workload; BENCH_EXTRA: a workload's own flags (recursive_stacks_fp, below).
define bench_build
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) $(BENCH_EXTRA) $< -o $@ -lpthread -ldl
endef

BENCH_DEPS := tests/bench/now.h include/oomtrace.h

$(B)/bench/%: tests/bench/%.c $(BENCH_DEPS) | $(B)/.deps
	$(bench_build)

bench-bins: $(BENCH_BINS)

.PHONY: bench-bins

# Reference preloads for the floor rows (tests/bench/ref): not trackers, lower bounds.
REF_SRCS := $(sort $(wildcard tests/bench/ref/*.c))
REF_LIBS := $(REF_SRCS:tests/bench/ref/%.c=$(B)/bench/ref/%.so)

$(B)/bench/ref/%.so: tests/bench/ref/%.c tests/bench/ref/next.h tests/bench/ref/ideal_table.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -fPIC -shared $(REF_DEFS) $< -o $@ -ldl $(REF_LDLIBS)

# The stack floors walk with libunwind, as oomtrace does where its own walker cannot; the safe ones
# are the other built with IDEAL_SAFE (and IDEAL_TABLE). ideal_table_shared is ideal_table built
# with IDEAL_SHARED, ideal_xthread_small ideal_xthread with IDEAL_SETS.
$(B)/bench/ref/ideal_stacks.so $(B)/bench/ref/ideal_stacks_safe.so $(B)/bench/ref/ideal_live_safe.so: REF_LDLIBS := -lunwind
$(B)/bench/ref/ideal_stacks_safe.so $(B)/bench/ref/ideal_live_safe.so: tests/bench/ref/ideal_stacks.c
$(B)/bench/ref/ideal_table_shared.so: tests/bench/ref/ideal_table.c
# ideal_xthread_small's arrays are oomtrace's first nursery, whatever size live_fast.h gives it.
$(B)/bench/ref/ideal_xthread_small.so: tests/bench/ref/ideal_xthread.c interpose/live_fast.h
$(B)/bench/ref/ideal_xthread_small.so: REF_DEFS := \
    -DIDEAL_SETS=$(shell sed -n 's/^\#define NURSERY_SETS \([0-9]*\)$$/\1/p' interpose/live_fast.h)

bench-bins: $(REF_LIBS)

# recursive_stacks built with frame pointers, as Fedora and Ubuntu now build their packages: its
# rbp-based frames take the walker's other rules, and LeakSanitizer's frame-pointer unwinder reads
# its stacks whole (scripts/bench.sh, the depth probe's like-for-like rows; tests/e2e/unwind_verify.sh).
$(B)/bench/recursive_stacks_fp: BENCH_EXTRA := -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
$(B)/bench/recursive_stacks_fp: tests/bench/recursive_stacks.c $(BENCH_DEPS) | $(B)/.deps
	$(bench_build)

bench-bins: $(B)/bench/recursive_stacks_fp
