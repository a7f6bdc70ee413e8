# The address-space breakdown's end-to-end pieces (included by the Makefile):
#   build/targets/libbigbss.so   a library with a 512 MiB bss
#   build/tests/tools/asmap_dump a maps text (another process's, e.g. a 32-bit one) written up as
#                                the report would, by the 64-bit parser and writers
$(B)/targets/libbigbss.so: tests/targets/bigbss_lib.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(TARGET_LIB_CFLAGS) $< -o $@

$(B)/tests/tools/asmap_dump: tests/e2e/asmap_dump.c interpose/*.h $(B)/libcore.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $< -o $@ $(B)/libcore.a $(LIBS)

EXTRA_TEST_BINS += $(B)/targets/libbigbss.so $(B)/tests/tools/asmap_dump
