# C++ targets and shared libraries for the end-to-end tests (included by the Makefile).
#   build/targets/NAME       from tests/targets/NAME.cc (g++)
#   build/targets/libdeep.so, libdlca.so, libdlcb.so, libpreload_hello.so: libraries that the
#   targets dlopen or that are preloaded (their sources also build as small programs that only say
#   what they are, through the generic C target rule).
CXX_TARGET_SRCS := $(sort $(wildcard tests/targets/*.cc))
CXX_TARGET_BINS := $(CXX_TARGET_SRCS:tests/targets/%.cc=$(B)/targets/%)
TARGET_LIB_CFLAGS := -std=gnu11 -D_GNU_SOURCE -DOT_SHARED_LIB -O1 -g -Wall -fPIC -shared -Iinclude

$(B)/targets/%: tests/targets/%.cc tests/targets/*.h include/oomtrace.h | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CXX) -std=gnu++17 -O1 -g -Wall -Iinclude $< -o $@ -lpthread -ldl

$(B)/targets/libdeep.so: tests/targets/deep_lib.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(TARGET_LIB_CFLAGS) $< -o $@

$(B)/targets/libdlca.so: tests/targets/dlc_lib.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(TARGET_LIB_CFLAGS) -DDLC_VARIANT=1 $< -o $@

$(B)/targets/libdlcb.so: tests/targets/dlc_lib.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(TARGET_LIB_CFLAGS) -DDLC_VARIANT=2 $< -o $@

$(B)/targets/libpreload_hello.so: tests/targets/preload_hello.c | $(B)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(TARGET_LIB_CFLAGS) $< -o $@

EXTRA_TEST_BINS += $(CXX_TARGET_BINS) $(B)/targets/libdeep.so $(B)/targets/libdlca.so \
    $(B)/targets/libdlcb.so $(B)/targets/libpreload_hello.so
