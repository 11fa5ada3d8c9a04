// Probe: try to open for writing (append, create) argv[1], /build/probe and
// /etc/probe; print "denied" or "written" for each, in that order.
#include <fstream>
#include <iostream>
#include <string>

static void attempt(const std::string& path) {
    std::ofstream f(path, std::ios::out | std::ios::app);
    std::cout << (f.is_open() ? "written" : "denied") << "\n";
}

int main(int argc, char** argv) {
    attempt(argc > 1 ? argv[1] : "");
    attempt("/build/probe");
    attempt("/etc/probe");
    return 0;
}
