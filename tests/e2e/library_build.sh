#!/usr/bin/env bash
# Properties of the built library itself: only the hooks and the public API are exported, TLS is
# initial-exec (touching it never allocates), and it depends on nothing that pulls in CUDA.
. "$(dirname "$0")/lib.sh"
syms=$(nm -D --defined-only "$OT_LIB" | awk '{print $3}' | sed 's/@.*//' | sort -u)
unexpected=$(printf '%s\n' "$syms" | grep -Ev '^(GLIBC_2\.[0-9.]+|malloc|free|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|malloc_usable_size|dlsym|dlvsym|dlclose|sigaction|__sigaction|signal|bsd_signal|ssignal|sysv_signal|__sysv_signal|sigset|sigignore|siginterrupt|sigaltstack|pthread_create|_exit|_Exit|execl|execle|execlp|execv|execve|execveat|execvp|execvpe|fexecve|oomtrace_[a-z_]+|cu[A-Z][A-Za-z0-9_]*|cuda[A-Z][A-Za-z0-9_]*)$')
if [ -z "$unexpected" ]; then pass exports_only_hooks_and_api; else fail exports_only_hooks_and_api "$(echo $unexpected)"; fi
if printf '%s\n' "$syms" | grep -q '^ot_'; then fail internals_hidden "ot_* symbols exported"; else pass internals_hidden; fi
check static_tls_initial_exec sh -c "readelf -d '$OT_LIB' | grep -q STATIC_TLS"
needed=$(readelf -d "$OT_LIB" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
case "$needed" in *cuda*|*nvidia*|*stdc++*) fail no_heavy_dependencies "$needed";; *) pass no_heavy_dependencies;; esac
for v in GLIBC_2.2.5 GLIBC_2.34; do
    if nm -D --defined-only "$OT_LIB" | grep -q "dlsym@@*$v"; then pass "dlsym_exported_as_$v"; else fail "dlsym_exported_as_$v" "missing"; fi
done
# make install PREFIX=...: the installed launcher finds the installed library through ../lib.
inst="$OT_TMP/prefix"
if make -s -C "$OT_ROOT" install PREFIX="$inst" >/dev/null 2>&1 && [ -x "$inst/bin/oomtrace" ] &&
    [ -f "$inst/lib/liboomtrace.so" ] && [ -f "$inst/include/oomtrace.h" ]; then
    out=$(cd "$OT_TMP" && "$inst/bin/oomtrace" -l none -o none -- "$OT_BUILD/examples/api_snapshot")
    case "$out" in "oomtrace "*" live host blocks"*) pass install_prefix_works;; *) fail install_prefix_works "$out";; esac
else
    fail install_prefix_works "make install PREFIX=$inst did not install the three files"
fi
