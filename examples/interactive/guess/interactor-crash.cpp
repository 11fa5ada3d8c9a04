// A broken judge for testing the harness: answers two queries like
// interactor.cpp, then crashes with abort() (exit by SIGABRT, 134 in a shell).
#include "interact.h"

using namespace ia;

int main(int argc, char** argv) {
    init(argc, argv);
    long long n = file_int(input, "n", 1, 1000000000000000000LL);
    long long q = file_int(input, "q", 1, 1000000);
    long long secret = file_int(input, "secret", 1, n);
    send(std::to_string(n) + " " + std::to_string(q));
    for (int k = 0; k < 2; k++) {
        std::vector<std::string> t = split(read_line());
        long long x;
        if (t.size() != 2 || t[0] != "?" || !to_int(t[1], x)) quit(PE, "expected \"? x\"");
        send(secret < x ? "<" : secret > x ? ">" : "=");
    }
    std::abort();
}
