/* Probe: try to open for writing (append, create) argv[1], /build/probe and
 * /etc/probe; print "denied" or "written" for each, in that order. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static void attempt(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) {
        puts("denied");
    } else {
        puts("written");
        close(fd);
    }
}

int main(int argc, char **argv) {
    attempt(argc > 1 ? argv[1] : "");
    attempt("/build/probe");
    attempt("/etc/probe");
    return 0;
}
