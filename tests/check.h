/* A minimal test harness for the C tests: CHECK counts, failures print file:line and the
 * expression, CHECK_DONE prints "N passed, N failed" (the line tests/run.sh reads). */
#ifndef DSA_CHECK_H
#define DSA_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (cond)                                                                                            \
            check_passed++;                                                                                  \
        else {                                                                                               \
            check_failed++;                                                                                  \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                                           \
        }                                                                                                    \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                   \
    do {                                                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                                                  \
        if (a_ == b_)                                                                                        \
            check_passed++;                                                                                  \
        else {                                                                                               \
            check_failed++;                                                                                  \
            printf("FAIL %s:%d: %s == %s (%lld != %lld, 0x%llx != 0x%llx)\n", __FILE__, __LINE__, #a, #b, a_,   \
                   b_, a_, b_);                                                                              \
        }                                                                                                    \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                \
    do {                                                                                                     \
        double a_ = (double)(a), b_ = (double)(b);                                                           \
        if (fabs(a_ - b_) <= (tol))                                                                          \
            check_passed++;                                                                                  \
        else {                                                                                               \
            check_failed++;                                                                                  \
            printf("FAIL %s:%d: %s ~ %s (%.9g vs %.9g, tol %.3g)\n", __FILE__, __LINE__, #a, #b, a_, b_,       \
                   (double)(tol));                                                                           \
        }                                                                                                    \
    } while (0)

#define CHECK_DONE()                                                                                         \
    do {                                                                                                     \
        printf("%d passed, %d failed\n", check_passed, check_failed);                                        \
        return check_failed ? 1 : 0;                                                                         \
    } while (0)

#endif
