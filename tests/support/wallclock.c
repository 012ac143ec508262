/* A test-only LD_PRELOAD shim: moves the wall clock, and nothing else.
 *
 * The clock-jump tests need a process whose wall clock reads an hour ahead (or behind)
 * while its boot clock (CLOCK_BOOTTIME, CLOCK_MONOTONIC) is the machine's own. Debian's
 * libfaketime can do that, but its clock_nanosleep wrapper makes every Python
 * time.sleep() fail with EINVAL when the monotonic clock is not faked, so a process that
 * ever waited would fail for a reason that has nothing to do with gitlease. This shim
 * shifts CLOCK_REALTIME (clock_gettime, gettimeofday, time) by WALLCLOCK_OFFSET_SECONDS
 * and passes every other call through. tests/conftest.py builds it with the C compiler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long offset_seconds(void) {
    static int read = 0;
    static long offset = 0;
    if (!read) {
        const char *text = getenv("WALLCLOCK_OFFSET_SECONDS");
        offset = text ? strtol(text, NULL, 10) : 0;
        read = 1;
    }
    return offset;
}

static int is_wall(clockid_t clock) {
    return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *) = NULL;
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int result = real(clock, ts);
    if (result == 0 && ts && is_wall(clock)) ts->tv_sec += offset_seconds();
    return result;
}

int gettimeofday(struct timeval *tv, void *tz) {
    static int (*real)(struct timeval *, void *) = NULL;
    if (!real) real = (int (*)(struct timeval *, void *))dlsym(RTLD_NEXT, "gettimeofday");
    int result = real(tv, tz);
    if (result == 0 && tv) tv->tv_sec += offset_seconds();
    return result;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
