#!/usr/bin/env bash
# Installs what the build needs from Debian when it is missing (as root), or says exactly which
# package to install. Called by the Makefile before the first build.
set -u
need=()
cc=${CC:-cc}
if ! echo '#include <libunwind.h>' | "$cc" -E -x c - >/dev/null 2>&1; then need+=(libunwind-dev); fi
# Tests only: glog's failure signal handler (tests/e2e/crash_signals.sh).
if ! echo '#include <glog/logging.h>' | "${CXX:-c++}" -E -x c++ - >/dev/null 2>&1; then need+=(libgoogle-glog-dev); fi
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v make >/dev/null 2>&1 || need+=(make)
# Optional: gcc-multilib for the 32-bit build of the host OOM example (tests/e2e/asmap.sh skips,
# saying why, without it). Installed when we can; never fails the build.
if ! echo 'int main(void){return 0;}' | "$cc" -m32 -x c - -o /dev/null >/dev/null 2>&1 &&
   [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "oomtrace: installing gcc-multilib (optional: the 32-bit test)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-multilib >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-multilib >/dev/null 2>&1; } ||
        echo "oomtrace: gcc-multilib could not be installed; the 32-bit test will be skipped" >&2
fi
# Optional: libFuzzer for the state-file reader's fuzz test (tests/fuzz; skipped without it).
if ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' |
    "${FUZZ_CC:-clang}" -fsanitize=fuzzer,address -x c - -o /dev/null >/dev/null 2>&1 &&
    [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "oomtrace: installing the optional fuzzer toolchain: clang libclang-rt-14-dev"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null 2>&1 ||
        echo "oomtrace: (clang libclang-rt-14-dev not installed: the fuzz test will be skipped)"
fi
# Optional: libdw1 (elfutils), which the leak report and the post-mortems dlopen for file:line
# (libdw=); without it frames have no line and the tests that check lines skip, saying why.
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libdw\.so\.1 ' && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "oomtrace: installing libdw1 (optional: file and line in leak reports)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libdw1 >/dev/null 2>&1 ||
        echo "oomtrace: libdw1 could not be installed; leak reports will have no file:line" >&2
fi
# Optional: Go, for the test that a cgo program's runtime still handles its own signals
# (tests/e2e/crash_signals.sh, skipped without it, saying why). Never fails the build.
if ! command -v go >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "oomtrace: installing golang-go (optional: the Go signal test)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null 2>&1; } ||
        echo "oomtrace: golang-go could not be installed; the Go signal test will be skipped" >&2
fi
# The leak check's tests: xmllint validates the JUnit file, strace runs a program under ptrace.
command -v xmllint >/dev/null 2>&1 || need+=(libxml2-utils)
command -v strace >/dev/null 2>&1 || need+=(strace)
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
