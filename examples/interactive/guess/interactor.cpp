// Guess the number. INPUT: "n q secret"; ANSWER: the secret again.
// We send "n q"; the program asks "? x" and gets "<", ">" or "=" (the secret is
// less than, greater than or equal to x), and ends with "! x". More than q
// queries is a wrong answer, decided on the first query over the limit.
#include "interact.h"

using namespace ia;
using std::to_string;

int main(int argc, char** argv) {
    init(argc, argv);
    long long n = file_int(input, "n", 1, 1000000000000000000LL);
    long long q = file_int(input, "q", 1, 1000000);
    long long secret = file_int(input, "secret", 1, n);
    if (file_int(answer, "ANSWER's secret", 1, n) != secret) quit(FAIL, "INPUT and ANSWER disagree on the secret");

    send(to_string(n) + " " + to_string(q));
    for (long long k = 0;;) {  // k: queries answered so far
        std::string line = read_line();
        std::vector<std::string> t = split(line);
        long long x;
        if (t.size() != 2 || (t[0] != "?" && t[0] != "!") || !to_int(t[1], x))
            quit(PE, "expected \"? x\" or \"! x\", got " + quoted(line));
        if (t[0] == "!") {
            if (x != secret) quit(WA, "claimed " + to_string(x) + ", the secret is " + to_string(secret));
            quit(AC, "found " + to_string(x) + " with " + to_string(k) + " queries");
        }
        if (++k > q) quit(WA, "query limit exceeded: query " + to_string(k) + ", limit " + to_string(q));
        if (x < 1 || x > n) quit(WA, "query " + to_string(x) + " is out of [1, " + to_string(n) + "]");
        send(secret < x ? "<" : secret > x ? ">" : "=");
    }
}
