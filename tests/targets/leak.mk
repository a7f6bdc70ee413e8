# The leak check's shared library target (tests/e2e/leak_check.sh): a dynamic TLS variable.
$(B)/targets/libleak_tls.so: tests/targets/leak_tls_lib.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(TARGET_LIB_CFLAGS) $< -o $@

EXTRA_TEST_BINS += $(B)/targets/libleak_tls.so

# Device leaks against the CUDA test doubles (tests/doubles/doubles.mk defines CT and the links).
$(CT)/leak_dev: tests/cuda_targets/leak_dev.c $(DBL)/libfakecudart.so $(DBL_HDRS)
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) $< -o $@ $(CT_RT_LINK)

EXTRA_TEST_BINS += $(CT)/leak_dev
