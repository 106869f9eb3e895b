/* The README's API example is examples/quickstart.c, word for word (that
 * file is built and run as test_quickstart). */
#include <string.h>

#include "check.h"

int main(void)
{
    const char *dir = getenv("FKV_SOURCE_DIR");
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/README.md", dir ? dir : ".");
    snprintf(b, sizeof b, "%s/examples/quickstart.c", dir ? dir : ".");
    char *readme = check_slurp(a), *example = check_slurp(b);
    REQUIRE(readme && example);
    const char *fence = strstr(readme, "```c\n");
    REQUIRE(fence);
    fence += 5;
    const char *end = strstr(fence, "```");
    REQUIRE(end);
    CHECKF((size_t)(end - fence) == strlen(example) && !strncmp(fence, example, strlen(example)),
           "the first ```c block of README.md differs from examples/quickstart.c");
    free(readme);
    free(example);
    return check_done();
}
