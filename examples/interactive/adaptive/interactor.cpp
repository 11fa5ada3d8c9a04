// Adaptive guessing. INPUT: "n"; ANSWER: m = ceil(log2 n).
// No secret is fixed: the judge keeps the candidates [lo, hi] consistent with
// all its answers and answers each "? x" so that the larger part survives (an
// adversary; ties answer ">"), "=" only when x is the last candidate. "! x" is
// right only when exactly one candidate remains and it is x.
// Score with k queries: k <= m accepted; m < k < 2m points (2m - k) / m;
// the 2m-th query is a wrong answer at once (it could score 0 at best).
#include "interact.h"

using namespace ia;
using std::to_string;

int main(int argc, char** argv) {
    init(argc, argv);
    long long n = file_int(input, "n", 1, 1LL << 60);
    long long m = 0;
    while ((1LL << m) < n) m++;  // ceil(log2 n)
    if (file_int(answer, "ANSWER's m", 0, 60) != m) quit(FAIL, "ANSWER's m is not ceil(log2 n) = " + to_string(m));

    send(to_string(n));
    long long lo = 1, hi = n, k = 0;  // k: queries answered so far
    for (;;) {
        std::string line = read_line();
        std::vector<std::string> t = split(line);
        long long x;
        if (t.size() != 2 || (t[0] != "?" && t[0] != "!") || !to_int(t[1], x))
            quit(PE, "expected \"? x\" or \"! x\", got " + quoted(line));
        if (x < 1 || x > n) quit(WA, t[0] + " " + to_string(x) + " is out of [1, " + to_string(n) + "]");
        if (t[0] == "!") {
            if (lo < hi)
                quit(WA, "claimed " + to_string(x) + " while " + to_string(hi - lo + 1) + " candidates remain: [" +
                             to_string(lo) + ", " + to_string(hi) + "]");
            if (x != lo) quit(WA, "claimed " + to_string(x) + ", but only " + to_string(lo) + " is consistent");
            std::string used = "used " + to_string(k) + " queries, optimum " + to_string(m);
            if (k <= m) quit(AC, "found " + to_string(x) + ", " + used);
            quit_points(double(2 * m - k) / m, used);
        }
        if (++k >= 2 * m) quit(WA, "query " + to_string(k) + ": 2m = " + to_string(2 * m) + " or more queries score 0");
        const char* r;
        if (x < lo) r = ">";                // answers forced by earlier ones
        else if (x > hi) r = "<";
        else if (lo == hi) r = "=";         // x is the last candidate
        else if (hi - x >= x - lo) r = ">", lo = x + 1;
        else r = "<", hi = x - 1;
        send(r);
    }
}
