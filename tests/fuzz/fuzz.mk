# The state-file reader's fuzzer (libFuzzer: clang -fsanitize=fuzzer, Debian's clang and
# libclang-rt-14-dev) where the toolchain has it, and a replay of the corpus with $(CC) + ASan always.
FUZZ_CC ?= clang
FUZZ_FLAGS := -std=gnu11 -D_GNU_SOURCE -g -O1 -Iinclude -Iinterpose -Ilauncher
FUZZ_SRCS := tests/fuzz/fuzz_statefile.c launcher/statefile.c
FUZZ_DEPS := $(FUZZ_SRCS) launcher/statefile.h launcher/launcher.h interpose/recorder_format.h
FUZZ_OK := $(shell printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' | \
    $(FUZZ_CC) -fsanitize=fuzzer,address -x c - -o /dev/null >/dev/null 2>&1 && echo yes)
ifeq ($(FUZZ_OK),yes)
EXTRA_TEST_BINS += $(B)/tests/fuzz/fuzz_statefile
endif
EXTRA_TEST_BINS += $(B)/tests/fuzz/replay_statefile

$(B)/tests/fuzz/fuzz_statefile: $(FUZZ_DEPS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined $(FUZZ_SRCS) -o $@

$(B)/tests/fuzz/replay_statefile: $(FUZZ_DEPS) tests/fuzz/replay_main.c
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_FLAGS) $(WARN) -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	    $(FUZZ_SRCS) tests/fuzz/replay_main.c -o $@
