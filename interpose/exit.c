/* The one exit path: at normal exit (exit() or a return from main), the final report
 * (report_at_exit=1), the leak check (leak_check=1), the flight recorder's close and the summary of
 * suppressed failures, and the exit status a failed leak check sets. Runs once, in the exiting
 * thread, never in a signal handler or on a failure path (it may use stdio: fflush). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

static void at_exit(int status, void *arg)
{
    (void)arg;
    static int ran;
    if (__atomic_exchange_n(&ran, 1, __ATOMIC_ACQ_REL)) return;
    ot_in_hook++;
    /* The program's buffered output goes out first: nothing it wrote may be lost when the check
     * ends the process with _exit. Only then: fflush locks each stream, which exit's own final
     * flush does not (a thread stuck writing to a full pipe would hold its stream's lock). */
    if (ot_opt.leak_check) fflush(NULL);
    if (ot_opt.report_at_exit) ot_report_event("exit", status ? "exit with a failure status" : "normal exit");
    bool leaked = false;
    if (ot_opt.leak_check) {
        ot_leak_set_status(status);
        leaked = ot_leak_check_run();
    }
    ot_recorder_close();
    ot_report_exit_summary();
    ot_in_hook--;
    /* The program's own failure status is kept; a clean exit with lost memory becomes
     * leak_exitcode. */
    if (leaked && status == 0 && ot_opt.leak_exitcode != 0) _exit((int)ot_opt.leak_exitcode);
}

/* on_exit, registered from our constructor (which ld.so runs before __libc_start_main registers
 * _dl_fini): exit runs it after the program's atexit handlers, its C++ static destructors and
 * every module's destructors, so what they free is no leak, and stdio is still to be flushed. It
 * receives the exit status, which atexit handlers do not. */
void ot_exit_install(void)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL)) return;
    on_exit(at_exit, NULL);
}
