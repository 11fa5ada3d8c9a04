// Probe: fork without bound; children sleep so they stay alive. When fork
// fails (pids limit), print "contained" and exit 0.
#include <cerrno>
#include <cstring>
#include <iostream>
#include <unistd.h>

int main() {
    for (long i = 0; i < 100000; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            std::cerr << "fork failed after " << i << " children: " << std::strerror(errno) << "\n";
            std::cout << "contained" << std::endl;
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
    std::cout << "not contained" << std::endl;
    return 1;
}
