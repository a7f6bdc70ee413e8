# A checking build of the library (included by the Makefile), compiled with OT_UNWIND_VERIFY:
# stack.c compares every stack of the CFI walker (unwind.c) with libunwind's, live.c and the malloc
# hooks (through live_fast.h) route their noted-stack probe through stack.c so those are compared too, and unwind.c derives every walk's
# checks a second, plain way and compares. Used by tests/e2e/unwind_verify.sh; never installed.
VERIFY_SRCS := stack live unwind hooks_libc
VERIFY_OBJS := $(VERIFY_SRCS:%=$(B)/obj-verify/%.o)
$(B)/obj-verify/%.o: interpose/%.c interpose/*.h include/*.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) -DOT_UNWIND_VERIFY -c $< -o $@

$(B)/verify/liboomtrace.so: $(filter-out $(VERIFY_SRCS:%=$(B)/obj/%.o),$(LIB_OBJS)) $(VERIFY_OBJS) $(VERSION_SCRIPT)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(filter %.o,$^) $(if $(VERSION_SCRIPT),-Wl$(comma)--version-script=$(VERSION_SCRIPT)) \
	    -Wl,-z,nodelete -Wl,--no-undefined $(LIBS)

EXTRA_TEST_BINS += $(B)/verify/liboomtrace.so
# unwind_verify.sh also checks the stacks of the bench's recursive workload, built as the bench builds it.
EXTRA_TEST_BINS += $(B)/bench/recursive_stacks $(B)/bench/recursive_stacks_fp
