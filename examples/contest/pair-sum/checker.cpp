// pair-sum's checker, testlib's conventions: checker INPUT OUTPUT ANSWER.
#include "judge.h"

int main(int argc, char** argv) {
    using namespace judge;
    if (argc < 4) quit(FAIL, "usage: checker INPUT OUTPUT ANSWER");
    auto input = tokens(argv[1]);
    auto output = tokens(argv[2]);
    auto answer = tokens(argv[3]);
    if (input.size() != 1) quit(FAIL, "the input is not one number");
    long long n = natural(input[0], FAIL, "n");
    if (answer.size() != 2 || natural(answer[0], FAIL, "the answer") + natural(answer[1], FAIL, "the answer") != n)
        quit(FAIL, "the jury's answer is wrong");
    if (output.size() < 2) quit(WRONG_ANSWER, "expected two numbers, found " + std::to_string(output.size()));
    if (output.size() > 2) quit(PRESENTATION_ERROR, "extra tokens after the pair");
    long long a = natural(output[0], WRONG_ANSWER, "a");
    long long b = natural(output[1], WRONG_ANSWER, "b");
    if (a + b != n) quit(WRONG_ANSWER, std::to_string(a) + " + " + std::to_string(b) + " != " + std::to_string(n));
    quit(OK, std::to_string(a) + " + " + std::to_string(b) + " = " + std::to_string(n));
}
