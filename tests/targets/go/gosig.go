// A Go program built with cgo (so that it is linked against libc and the preload applies), for
// tests/e2e/crash_signals.sh: the Go runtime's own signal handling must work as without oomtrace.
// usage: gosig recover|notify|cfail|hold|panic|csegv|gosegv
//   recover  a nil dereference in Go code, 1000 times: the runtime's SIGSEGV handler turns each
//            into a panic that recover() catches; memory from C's malloc through cgo on the way
//   notify   os/signal: SIGUSR1 and SIGUSR2 sent to ourselves arrive on a channel
//   cfail    C's malloc of 2^62 bytes through cgo fails: oomtrace's failure report, NULL returned
//   hold     keeps 64 MiB from C's malloc for half a second (the recorder's state file appears),
//            then returns from main: the Go runtime ends with the exit_group system call
//   panic    an unrecovered panic (nil map write): Go prints it and its goroutine, exit status 2
//   csegv    a SIGSEGV in C code called through cgo: the runtime's "fatal error", exit status 2
//   gosegv   an unrecovered nil dereference in Go code: "panic: runtime error", exit status 2
package main

/*
#include <stdlib.h>
static void *c_alloc(size_t n) { return malloc(n); }
static void c_segv(void) { volatile int *p = (int *)8; *p = 1; }
*/
import "C"

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
	"unsafe"
)

var sink *int

func nilDeref() (err interface{}) {
	defer func() { err = recover() }()
	*sink = 1
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gosig recover|notify|cfail|hold|panic|csegv|gosegv")
		os.Exit(64)
	}
	switch os.Args[1] {
	case "recover":
		for i := 0; i < 1000; i++ {
			if nilDeref() == nil {
				fmt.Println("a nil dereference did not panic")
				os.Exit(1)
			}
			p := C.c_alloc(C.size_t(64 + i))
			*(*byte)(p) = byte(i)
			C.free(unsafe.Pointer(p))
		}
		fmt.Println("recovered 1000 nil dereferences:", nilDeref())
	case "notify":
		c := make(chan os.Signal, 2)
		signal.Notify(c, syscall.SIGUSR1, syscall.SIGUSR2)
		syscall.Kill(os.Getpid(), syscall.SIGUSR1)
		fmt.Println("got", <-c)
		syscall.Kill(os.Getpid(), syscall.SIGUSR2)
		fmt.Println("got", <-c)
	case "cfail":
		fmt.Println("malloc(2^62) gave NULL:", C.c_alloc(C.size_t(1)<<62) == nil)
	case "hold":
		for i := 0; i < 64; i++ {
			p := C.c_alloc(1 << 20)
			for j := 0; j < 1<<20; j += 4096 {
				*(*byte)(unsafe.Add(p, j)) = 1
			}
		}
		time.Sleep(500 * time.Millisecond)
		fmt.Println("held 64 MiB")
	case "panic":
		var m map[string]int
		m["a"] = 1
	case "csegv":
		C.c_segv()
	case "gosegv":
		*sink = 1
	}
}
