# The leak check's shared library target (tests/e2e/leak_check.sh): a dynamic TLS variable.
$(B)/targets/libleak_tls.so: tests/targets/leak_tls_lib.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(TARGET_LIB_CFLAGS) $< -o $@

EXTRA_TEST_BINS += $(B)/targets/libleak_tls.so
