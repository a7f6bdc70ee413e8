/* The CUDA family's internal interface: state shared between the core side (cuda_state.c,
 * cuda_probe.c: linked into unit tests) and the hooks (hooks_cuda.c, hooks_cudart.c,
 * hooks_dlsym.c). Nothing here loads libcuda into a process that has not loaded it itself, except
 * the device probe of a device-failure report (may_load). */
#ifndef OT_CUDA_INTERNAL_H
#define OT_CUDA_INTERNAL_H

#include "cuda_abi.h"
#include "internal.h"

/* ------------------------------------------------------------------ cuda_state.c (core) */
/* The driver's own entry points (never our wrappers), for probing and for what the hooks need to
 * know about a call (its device, its error's name). */
typedef struct {
#define OT_CU_FIELD(ret, sym, base, ver, sfx, params, args) ot_fn_##sym sym;
    OT_CU_CALLED(OT_CU_FIELD)
#undef OT_CU_FIELD
} ot_cuda_driver_t;

/* libcuda.so.1 if this process has loaded it (RTLD_NOLOAD), else NULL; with may_load, loads it and
 * on failure copies dlerror()'s reason into why. */
void *ot_cuda_driver_handle(bool may_load, char *why, size_t why_cap);
/* The driver's entry points, resolved once libcuda is loaded; NULL before (or with may_load
 * false and no libcuda). Members may be NULL where the installed driver lacks them. */
const ot_cuda_driver_t *ot_cuda_driver(bool may_load, char *why, size_t why_cap);
/* A dlsym handle (from dlopen RTLD_NOLOAD: dlclose it) for the object containing addr, or NULL;
 * the object's link_map in *lm_out. */
void *ot_handle_of_address(const void *addr, void **lm_out);
/* A CUDA library was seen in this process (a hook ran or a lookup resolved a CUDA symbol). */
void ot_cuda_mark_active(void);
/* Device of the calling thread's current context, -1 if none (or no driver). */
int ot_cuda_current_device(void);
/* "CUDA_ERROR_OUT_OF_MEMORY"; a fixed table first, then the driver's cuGetErrorName. */
const char *ot_cuda_error_name(int code);
/* An error by which the driver or the runtime refused the request's arguments or properties rather
 * than ran short of memory (invalid value or device, not permitted, not supported): programs probe
 * with such requests and fall back, as PyTorch's expandable segments do when the driver refuses a
 * fabric handle. The hooks give these one log line, not a failure report. */
bool ot_cuda_error_is_refusal(int code);
/* Names of runtime errors when the runtime cannot be asked. */
const char *ot_cudart_error_name_fallback(int code);
/* Stream-ordered allocations remember their stream (the live table's value has no room for it).
 * Lock-free, fixed size; a full table just stops remembering. */
void ot_cuda_stream_put(uint64_t key, uint64_t stream);
bool ot_cuda_stream_take(uint64_t key, uint64_t *stream);
bool ot_cuda_stream_of(uint64_t key, uint64_t *stream);

/* Per-thread depth of CUDA wrappers: >0 while a driver wrapper's real call runs (a driver wrapper
 * reached again underneath goes straight to the driver's own export, so that two interposers that
 * hand each other's wrappers around cannot loop). */
extern OT_TLS int ot_cuda_drv_depth;

/* ------------------------------------------------------------------ hooks_cuda.c (shim) */
/* A driver symbol some lookup resolved to `real`: our wrapper of that exact variant, or NULL if we
 * do not wrap it. Remembers `real` as what the wrapper calls. */
void *ot_cu_wrap_symbol(const char *symbol, void *real);
/* The answer to a cuGetProcAddress-style lookup of (base, version, flags) that the driver resolved
 * to `real` (never NULL): our wrapper of the variant the driver picked, or `real` itself. */
void *ot_cu_wrap_lookup(const char *base, int version, uint64_t flags, void *real);
bool ot_cu_is_wrapper(const void *p);
bool ot_cu_wraps_symbol(const char *symbol);

/* ------------------------------------------------------------------ hooks_cudart.c (shim) */
/* Same for runtime symbols found with dlsym/dlvsym: the wrapper that calls `real`, or NULL. */
void *ot_cudart_wrap_symbol(const char *symbol, void *real);
bool ot_cudart_is_wrapper(const void *p);
bool ot_cudart_wraps_symbol(const char *symbol);

/* ------------------------------------------------------------------ hooks_dlsym.c (shim) */
/* The library's own text, to tell our wrappers from anyone else's functions. */
bool ot_is_own_address(const void *p);

#endif
