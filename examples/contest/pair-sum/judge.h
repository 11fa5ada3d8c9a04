// A small testlib-style helper for checkers (progscore's own, not testlib):
// read the three files a checker is given, and end with testlib's exit codes.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace judge {

enum Verdict { OK = 0, WRONG_ANSWER = 1, PRESENTATION_ERROR = 2, FAIL = 3 };

[[noreturn]] inline void quit(Verdict verdict, const std::string& message) {
    static const char* names[] = {"ok", "wrong answer", "wrong output format", "FAIL"};
    std::fprintf(stderr, "%s %s\n", names[verdict], message.c_str());
    std::exit(verdict);
}

// The whitespace-separated tokens of a file (FAIL when it cannot be read).
inline std::vector<std::string> tokens(const char* path) {
    std::ifstream in(path);
    if (!in) quit(FAIL, std::string("cannot read ") + path);
    std::vector<std::string> out;
    std::string token;
    while (in >> token) out.push_back(token);
    return out;
}

// A token as a non-negative integer, or the verdict `otherwise`.
inline long long natural(const std::string& token, Verdict otherwise, const char* what) {
    if (token.empty() || token.size() > 18) quit(otherwise, std::string(what) + " is not a number: " + token);
    long long value = 0;
    for (char c : token) {
        if (c < '0' || c > '9') quit(otherwise, std::string(what) + " is not a non-negative integer: " + token);
        value = value * 10 + (c - '0');
    }
    return value;
}

}  // namespace judge
