/* One process per DCP rank, as production runs them (NCCL between processes): count the GPUs in a
 * child, fork the ranks, collect how they ended. No CUDA here (CUDA does not survive fork, so the
 * parent never initialises it): the GPU tests (tests/gpu/harness.c) and dsa-demo, which opens the
 * driver at run time, pass their own device count. Header-only, so that dsa-demo, built with the
 * runtime, shares it without a build edge of its own. */
#ifndef DSA_TEST_RANKS_H
#define DSA_TEST_RANKS_H

#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define RANKS_MAX 8

typedef struct ranks {
    int n;
    pid_t pid[RANKS_MAX];
    int fd[RANKS_MAX]; /* the read end of rank r's pipe, or -1 */
} ranks_t;

/* count() run in a child process: the number of devices (at most 250, an exit status), 0 when the
 * child did not end normally. */
static inline int ranks_count_devices(int (*count)(void))
{
    fflush(stdout); /* the child must not repeat what is buffered */
    pid_t c = fork();
    if (c == 0) {
        int n = count();
        _exit(n < 0 ? 0 : n > 250 ? 250 : n);
    }
    if (c < 0)
        return 0;
    int st;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

/* Forks n ranks (n <= RANKS_MAX). Rank r sets alarm(alarm_s) when alarm_s > 0 (a rank that fails
 * leaves its peers waiting in NCCL: end them all rather than hang), runs fn(r, fd, arg) with fd
 * the write end of a pipe to the parent (g->fd[r]) when pipes is set, else -1, then flushes stdout
 * (_exit does not) and exits with fn's return value. stdout is flushed before forking, so nothing
 * buffered is printed again by the ranks. Returns 0, or -1 when a pipe or a fork failed (g->n
 * counts the ranks started: ranks_wait them). */
static inline int ranks_fork(ranks_t *g, int n, int pipes, unsigned alarm_s, int (*fn)(int rank, int fd, void *arg),
                             void *arg)
{
    g->n = 0;
    if (n < 1 || n > RANKS_MAX)
        return -1;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n; r++) {
        int p[2] = {-1, -1};
        if (pipes && pipe(p) != 0)
            return -1;
        pid_t pid = fork();
        if (pid == 0) {
            if (alarm_s)
                alarm(alarm_s);
            if (pipes)
                close(p[0]);
            int rc = fn(r, p[1], arg);
            fflush(stdout);
            fflush(stderr);
            _exit(rc);
        }
        if (pipes)
            close(p[1]);
        if (pid < 0) {
            if (pipes)
                close(p[0]);
            return -1;
        }
        g->pid[r] = pid;
        g->fd[r] = p[0];
        g->n = r + 1;
    }
    return 0;
}

/* Waits for every rank in order and closes the pipes' read ends; 1 when any rank failed (a signal,
 * or a non-zero exit status), else 0. */
static inline int ranks_wait(ranks_t *g)
{
    int failed = 0;
    for (int r = 0; r < g->n; r++) {
        int st;
        failed |= waitpid(g->pid[r], &st, 0) != g->pid[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        if (g->fd[r] >= 0)
            close(g->fd[r]);
    }
    g->n = 0;
    return failed;
}

#endif
