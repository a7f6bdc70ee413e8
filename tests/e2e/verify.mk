# A checking build of the library (included by the Makefile): stack.c and live.c compiled with
# OT_UNWIND_VERIFY compare every stack of the CFI walker (unwind.c) with libunwind's.
# Used by tests/e2e/unwind_verify.sh; never installed.
# live.c too: it asks ot_stack_noted_at, which only the verifying build routes through stack.c;
# and unwind.c, which then derives every walk's checks a second, plain way and compares.
VERIFY_OBJS := $(B)/obj-verify/stack.o $(B)/obj-verify/live.o $(B)/obj-verify/unwind.o
$(B)/obj-verify/%.o: interpose/%.c interpose/*.h include/*.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) -DOT_UNWIND_VERIFY -c $< -o $@

$(B)/verify/liboomtrace.so: $(filter-out $(B)/obj/stack.o $(B)/obj/live.o $(B)/obj/unwind.o,$(LIB_OBJS)) $(VERIFY_OBJS) $(VERSION_SCRIPT)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(filter %.o,$^) $(if $(VERSION_SCRIPT),-Wl$(comma)--version-script=$(VERSION_SCRIPT)) \
	    -Wl,-z,nodelete -Wl,--no-undefined $(LIBS)

EXTRA_TEST_BINS += $(B)/verify/liboomtrace.so
