# A checking build of the library (included by the Makefile): stack.c compiled with
# OT_UNWIND_VERIFY compares every stack of the CFI walker (unwind.c) with libunwind's.
# Used by tests/e2e/unwind_verify.sh; never installed.
$(B)/obj-verify/stack.o: interpose/stack.c interpose/*.h include/*.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) -DOT_UNWIND_VERIFY -c $< -o $@

$(B)/verify/liboomtrace.so: $(filter-out $(B)/obj/stack.o,$(LIB_OBJS)) $(B)/obj-verify/stack.o $(VERSION_SCRIPT)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(filter %.o,$^) $(if $(VERSION_SCRIPT),-Wl$(comma)--version-script=$(VERSION_SCRIPT)) \
	    -Wl,-z,nodelete -Wl,--no-undefined $(LIBS)

EXTRA_TEST_BINS += $(B)/verify/liboomtrace.so
