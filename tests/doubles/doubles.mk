# CUDA test doubles (driver, runtime, NVML), the target programs run against them, and the CUDA
# examples built against them (with g++; scripts/gpu-check builds the same .cu files with nvcc).
# Included by the Makefile; nothing here needs the CUDA toolkit.
DBL := $(B)/doubles
DBL_DIR = $(abspath $(DBL))
CXX ?= g++
DBL_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O1 -g -Wall -Wno-unused-parameter -fPIC -fvisibility=hidden \
    -Iinterpose -Itests/doubles/include
CT_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O1 -g -Wall -Iinclude -Iinterpose -Itests/doubles/include
DBL_HDRS := interpose/cuda_abi.h tests/doubles/fake_env.h $(wildcard tests/doubles/include/*.h)

DOUBLES := $(DBL)/libcuda.so.1 $(DBL)/libfakecudart.so $(DBL)/libfakecudart.a $(DBL)/libnvidia-ml.so.1

# The driver: soname libcuda.so.1, -Bsymbolic so that the pointers it hands out are its own
# functions even with our same-named exports preloaded (as with the real driver).
$(DBL)/libcuda.so.1: tests/doubles/fake_cuda.c $(DBL_HDRS)
	@mkdir -p $(DBL)
	$(CC) $(DBL_CFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic $< -o $@ -lpthread
	@ln -sf libcuda.so.1 $(DBL)/libcuda.so

# The runtime, shared (symbols versioned libcudart.so.13 like the real one) and static.
$(DBL)/libfakecudart.so: tests/doubles/fake_cudart.c tests/doubles/cudart.map $(DBL_HDRS)
	@mkdir -p $(DBL)
	$(CC) $(DBL_CFLAGS) -shared -Wl,-soname,libfakecudart.so -Wl,-Bsymbolic \
	    -Wl,--version-script=tests/doubles/cudart.map $< -o $@ -ldl -lpthread

$(DBL)/fake_cudart_static.o: tests/doubles/fake_cudart.c $(DBL_HDRS)
	@mkdir -p $(DBL)
	$(CC) $(DBL_CFLAGS) -c $< -o $@

$(DBL)/libfakecudart.a: $(DBL)/fake_cudart_static.o
	@rm -f $@
	ar rcs $@ $<

$(DBL)/libnvidia-ml.so.1: tests/doubles/fake_nvml.c $(DBL_HDRS)
	@mkdir -p $(DBL)
	$(CC) $(DBL_CFLAGS) -shared -Wl,-soname,libnvidia-ml.so.1 $< -o $@ -ldl

# ---- target programs (tests/cuda_targets), named by how they reach CUDA
CT := $(B)/cuda_targets
CT_RT_LINK = $(DBL)/libfakecudart.so -Wl,-rpath,$(DBL_DIR) -ldl -lpthread
CT_ST_LINK = $(DBL)/libfakecudart.a -ldl -lpthread
CT_DRV_LINK = -L$(DBL) -lcuda -Wl,-rpath,$(DBL_DIR) -ldl -lpthread

CUDA_TARGETS := $(CT)/paths_shared $(CT)/paths_static $(CT)/drv_paths $(CT)/dl_torchlike $(CT)/nocuda \
    $(CT)/next_main $(CT)/entry_points

# paths.c through the shared runtime (runtime-level records) and the static one (driver-level).
$(CT)/paths_shared: tests/cuda_targets/paths.c $(DBL)/libfakecudart.so $(DBL_HDRS)
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) $< -o $@ $(CT_RT_LINK)

$(CT)/paths_static: tests/cuda_targets/paths.c $(DBL)/libfakecudart.a $(DBL_HDRS)
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) $< -o $@ $(CT_ST_LINK)

$(CT)/drv_paths: tests/cuda_targets/drv_paths.c $(DBL)/libcuda.so.1 $(DBL_HDRS)
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) $< -o $@ $(CT_DRV_LINK)

$(CT)/entry_points: tests/cuda_targets/entry_points.c $(DBL)/libfakecudart.so $(DBL_HDRS)
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) $< -o $@ $(CT_RT_LINK)

$(CT)/dl_torchlike: tests/cuda_targets/dl_torchlike.c $(DBL_HDRS)
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) $< -o $@ -ldl -lpthread

$(CT)/nocuda: tests/cuda_targets/nocuda.c
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) $< -o $@ -ldl -lpthread -lm

# RTLD_NEXT through our dlsym hook: liba's lookup must still find libb's definition.
$(CT)/libnext_b.so: tests/cuda_targets/next_lib.c
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) -fPIC -shared -DNEXT_LIB_B $< -o $@ -ldl

$(CT)/libnext_a.so: tests/cuda_targets/next_lib.c
	@mkdir -p $(CT)
	$(CC) $(CT_CFLAGS) -fPIC -shared -DNEXT_LIB_A $< -o $@ -ldl

$(CT)/next_main: tests/cuda_targets/next_main.c $(CT)/libnext_a.so $(CT)/libnext_b.so
	$(CC) $(CT_CFLAGS) $< -o $@ -L$(CT) -Wl,--no-as-needed -lnext_a -lnext_b -Wl,-rpath,$(abspath $(CT)) -ldl

# ---- the CUDA examples against the doubles (nvcc builds them for real in scripts/gpu-check)
CUDA_EXAMPLES := $(B)/examples/cuda_oom $(B)/examples/cuda_driver_oom

$(B)/examples/cuda_oom: examples/cuda_oom.cu $(DBL)/libfakecudart.so $(DBL_HDRS)
	@mkdir -p $(dir $@)
	$(CXX) -x c++ -std=c++11 -O1 -g -Wall -Iinclude -Iinterpose -Itests/doubles/include $< -x none -o $@ $(CT_RT_LINK)

$(B)/examples/cuda_driver_oom: examples/cuda_driver_oom.cu $(DBL)/libcuda.so.1 $(DBL_HDRS)
	@mkdir -p $(dir $@)
	$(CXX) -x c++ -std=c++11 -O1 -g -Wall -Iinclude -Iinterpose -Itests/doubles/include $< -x none -o $@ $(CT_DRV_LINK)

EXTRA_TEST_BINS += $(DOUBLES) $(CUDA_TARGETS) $(CUDA_EXAMPLES)
EXTRA_DEMO_BINS += $(DOUBLES) $(CUDA_EXAMPLES)
