// Writes "? 1" for ever without reading the answers. The judge must give up at
// query q + 1 (limit exceeded) and exit; our next write then meets a closed
// pipe and SIGPIPE ends us.
#include <csignal>
#include <cstdio>

int main() {
    std::signal(SIGPIPE, SIG_DFL);  // die by SIGPIPE even if a parent ignored it
    while (std::fputs("? 1\n", stdout) != EOF) {
    }
    return 1;  // write error without SIGPIPE
}
