// The manager of ioi-double, as CMS runs a Communication manager: the
// test's input on stdin, argv[1] the pipe from the user, argv[2] the pipe
// to the user; the score on stdout, the message on stderr.
#include <csignal>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    if (argc < 3) return 1;
    int count = 0;
    if (std::scanf("%d", &count) != 1 || count <= 0) return 1;
    std::vector<long long> numbers(count);
    for (auto& x : numbers)
        if (std::scanf("%lld", &x) != 1) return 1;
    FILE* to_user = std::fopen(argv[2], "w");
    FILE* from_user = std::fopen(argv[1], "r");
    if (!to_user || !from_user) return 1;
    std::fprintf(to_user, "%d\n", count);
    std::fflush(to_user);
    int right = 0;
    for (long long x : numbers) {
        std::fprintf(to_user, "%lld\n", x);
        std::fflush(to_user);
        long long answer = 0;
        if (std::fscanf(from_user, "%lld", &answer) != 1) break;
        if (answer == 2 * x) ++right;
    }
    std::printf("%.6f\n", static_cast<double>(right) / count);
    std::fprintf(stderr, "%d of %d answers right\n", right, count);
    return 0;
}
