/* LD_PRELOAD shim for tests/run.sh, to test the generator's output commit:
 *   DSAGEN_FAIL_RENAME=N   the Nth call of rename() (counted from 1) fails with EIO: the rollback
 *   DSAGEN_SLOW_MKDIR=MS   mkdir() waits MS milliseconds first, so that two generators creating
 *                          the same folder both find it missing and both call mkdir() */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

int rename(const char *from, const char *to)
{
    static int calls;
    static int (*real)(const char *, const char *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "rename");
    const char *n = getenv("DSAGEN_FAIL_RENAME");
    if (n && ++calls == atoi(n)) {
        errno = EIO;
        return -1;
    }
    return real(from, to);
}

int mkdir(const char *path, mode_t mode)
{
    static int (*real)(const char *, mode_t);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "mkdir");
    const char *ms = getenv("DSAGEN_SLOW_MKDIR");
    if (ms) {
        long t = atol(ms);
        struct timespec ts = {t / 1000, (t % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
    return real(path, mode);
}
