#!/usr/bin/env bash
# Installs what the build needs from Debian when it is missing (as root), or says exactly which
# package to install. Called by the Makefile before the first build.
set -u
need=()
cc=${CC:-cc}
if ! echo '#include <libunwind.h>' | "$cc" -E -x c - >/dev/null 2>&1; then need+=(libunwind-dev); fi
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v make >/dev/null 2>&1 || need+=(make)
# Optional: libFuzzer for the state-file reader's fuzz test (tests/fuzz; skipped without it).
if ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' |
    "${FUZZ_CC:-clang}" -fsanitize=fuzzer,address -x c - -o /dev/null >/dev/null 2>&1 &&
    [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "oomtrace: installing the optional fuzzer toolchain: clang libclang-rt-14-dev"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null 2>&1 ||
        echo "oomtrace: (clang libclang-rt-14-dev not installed: the fuzz test will be skipped)"
fi
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "oomtrace: installing missing build dependencies: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq "${need[@]}" >/dev/null && exit 0
    echo "oomtrace: apt-get install ${need[*]} failed" >&2
    exit 1
fi
echo "oomtrace: missing build dependencies; please install the Debian packages: ${need[*]}" >&2
echo "          (for example: sudo apt-get install ${need[*]})" >&2
exit 1
