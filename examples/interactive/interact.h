// interact.h: a small helper for interactors (our own; not testlib).
//
// An interactor runs as `interactor INPUT OUTPUT ANSWER`. Our stdin is the
// program's stdout and our stdout is the program's stdin, so the verdict's
// message goes to stderr. Exit codes follow testlib's convention:
//   0 accepted, 1 wrong answer, 2 presentation error, 3 FAIL (judge's fault),
//   7 partial points (message starts with "points X", X in [0, 1]).
#pragma once

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ia {

enum Verdict { AC = 0, WA = 1, PE = 2, FAIL = 3 };
constexpr int POINTS = 7;

inline std::ifstream input, answer;  // the test's INPUT and ANSWER files

[[noreturn]] inline void quit(Verdict v, const std::string& msg) {
    static const char* const word[] = {"ok", "wrong answer", "presentation error", "FAIL"};
    std::fprintf(stderr, "%s %s\n", word[v], msg.c_str());
    std::exit(v);
}

// Partial score: exit 7 with "points X message" on stderr.
[[noreturn]] inline void quit_points(double fraction, const std::string& msg) {
    if (!(fraction >= 0 && fraction <= 1)) quit(FAIL, "points out of [0, 1]: " + std::to_string(fraction));
    std::fprintf(stderr, "points %.6g %s\n", fraction, msg.c_str());
    std::exit(POINTS);
}

inline void init(int argc, char** argv) {
    // A program that exits early closes its stdin; writing to it must not kill us
    // (SIGPIPE): the write just fails and our next read sees EOF, a wrong answer.
    std::signal(SIGPIPE, SIG_IGN);
    if (argc != 4) quit(FAIL, "usage: interactor INPUT OUTPUT ANSWER");
    input.open(argv[1]);   // OUTPUT (argv[2]) is not used
    answer.open(argv[3]);
    if (!input) quit(FAIL, std::string("cannot open INPUT ") + argv[1]);
    if (!answer) quit(FAIL, std::string("cannot open ANSWER ") + argv[3]);
}

// One integer in [lo, hi] from INPUT or ANSWER; anything else is the judge's fault.
inline long long file_int(std::ifstream& f, const std::string& what, long long lo, long long hi) {
    long long v;
    if (!(f >> v)) quit(FAIL, "cannot read " + what);
    if (v < lo || v > hi) quit(FAIL, what + " = " + std::to_string(v) + " is out of range");
    return v;
}

// Sends one line and flushes at once, or the program waits for ever for it.
// A failed write (program gone) is ignored: the next read_line reports EOF.
inline void send(const std::string& line) {
    std::fputs(line.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

constexpr std::size_t MAX_LINE = 4096;

// One line of the program's output, without its '\n'. EOF before any character
// is a wrong answer. The length cap stops a program flooding one endless line.
inline std::string read_line() {
    std::string s;
    int c;
    while ((c = std::getchar()) != EOF && c != '\n') {
        if (s.size() >= MAX_LINE) quit(PE, "line longer than " + std::to_string(MAX_LINE) + " characters");
        s += char(c);
    }
    if (c == EOF && s.empty()) quit(WA, "unexpected end of the program's output");
    return s;
}

// Tokens of a line, separated by runs of spaces, tabs or '\r'.
inline std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> t;
    std::string cur;
    for (char c : line + ' ') {
        if (c == ' ' || c == '\t' || c == '\r') {
            if (!cur.empty()) t.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    return t;
}

// Strict decimal integer: "0" or an optional '-' then 1..18 digits, no leading
// zero, no '+'. 18 digits cannot overflow a long long.
inline bool to_int(const std::string& t, long long& v) {
    bool neg = !t.empty() && t[0] == '-';
    std::string d = t.substr(neg);
    if (d.empty() || d.size() > 18 || (d[0] == '0' && (d.size() > 1 || neg))) return false;
    v = 0;
    for (char c : d) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    if (neg) v = -v;
    return true;
}

// A line quoted for a message: cut short so a huge line cannot bloat stderr,
// bytes outside printable ASCII shown as '.'.
inline std::string quoted(const std::string& line) {
    std::string s = line.substr(0, 40);
    for (char& c : s)
        if (c < 0x20 || c > 0x7e) c = '.';
    return "\"" + s + (line.size() > 40 ? "...\"" : "\"");
}

}  // namespace ia
