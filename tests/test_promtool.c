/* /metrics passes `promtool check metrics` (format and lint), after real
 * traffic so every histogram and counter has values. */
#include <stdio.h>

#include "check.h"
#include "server_fixture.h"

int main(void)
{
    char promtool[512];
    fkv_backend be;
    fkv_server *srv;
    unsigned port;
    fixture_start_for_tool("promtool", promtool, sizeof promtool, &be, &srv, &port);
    http_resp r = {0};
    http_do(&r, port, "GET", "/metrics", NULL, 0, NULL);
    REQUIRE(r.status == 200 && r.body.len > 0);

    char dir[] = "/tmp/fkv_promtool_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char file[128], out[128], cmd[1024];
    snprintf(file, sizeof file, "%s/metrics.txt", dir);
    snprintf(out, sizeof out, "%s/promtool.out", dir);
    FILE *f = fopen(file, "w");
    REQUIRE(f);
    fwrite(r.body.data, 1, r.body.len, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' check metrics < '%s' > '%s' 2>&1", promtool, file, out);
    int rc = system(cmd);
    CHECKF(rc == 0, "promtool check metrics failed (status %d); its output:", rc);
    f = fopen(out, "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) fputs(line, stderr);
        fclose(f);
    }
    /* a broken exposition must fail, or the check above proves nothing */
    f = fopen(file, "w");
    REQUIRE(f);
    fputs("# TYPE broken_total counter\nbroken_total{a=\"1\" 3\n", f);
    fclose(f);
    CHECK(system(cmd) != 0);
    unlink(file);
    unlink(out);
    rmdir(dir);

    http_free(&r);
    fkv_server_destroy(srv);
    fkv_backend_destroy(&be);
    curl_global_cleanup();
    return check_done();
}
