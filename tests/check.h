/* Minimal test harness: CHECK records a failure and goes on; each test
 * program ends with check_done(), which prints "N passed, N failed" and
 * returns the exit status.  SKIP exits 77 (CTest's skip code is set per
 * test where used) after printing why. */
#ifndef FKV_TEST_CHECK_H
#define FKV_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_pass_, check_fail_;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (cond) {                                                              \
            check_pass_++;                                                       \
        } else {                                                                 \
            check_fail_++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECKF(cond, ...)                                                        \
    do {                                                                         \
        if (cond) {                                                              \
            check_pass_++;                                                       \
        } else {                                                                 \
            check_fail_++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

/* Stops the test at once: for a failure that makes the rest meaningless. */
#define REQUIRE(cond)                                                            \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                             \
        }                                                                        \
        check_pass_++;                                                           \
    } while (0)

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_pass_, check_fail_);
    return check_fail_ ? 1 : 0;
}

/* Scale factor for long randomized tests (sanitizer builds run fewer ops). */
static inline double check_scale(void)
{
    const char *s = getenv("FKV_TEST_SCALE");
    double v = s ? atof(s) : 1.0;
    return v > 0 ? v : 1.0;
}

/* A whole file as a NUL-terminated string (malloc'd), or NULL. */
static inline char *check_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

#endif
