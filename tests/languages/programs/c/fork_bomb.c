/* Probe: fork without bound; children sleep so they stay alive. When fork
 * fails (pids limit), print "contained" and exit 0. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    for (long i = 0; i < 100000; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "fork failed after %ld children: %s\n", i, strerror(errno));
            puts("contained");
            return 0;
        }
        if (pid == 0) {
            close(0);
            close(1);
            close(2);
            sleep(5);
            _exit(0);
        }
    }
    puts("not contained");
    return 1;
}
