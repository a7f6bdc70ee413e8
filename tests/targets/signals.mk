# The crash-signal tests' preloaded library (tests/e2e/crash_signals.sh): a handler installed
# by a constructor that runs before oomtrace's.
$(B)/targets/libsig_early.so: tests/targets/sig_early.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(TARGET_LIB_CFLAGS) $< -o $@

EXTRA_TEST_BINS += $(B)/targets/libsig_early.so
