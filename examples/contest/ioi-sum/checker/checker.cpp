// ioi-sum's checker, CMS's conventions: checker INPUT ANSWER OUTPUT; the
// score (1 or 0) on stdout, the message on stderr.
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
    if (argc < 4) { std::cerr << "usage: checker INPUT ANSWER OUTPUT\n"; return 1; }
    std::ifstream answer_file(argv[2]), output_file(argv[3]);
    std::string answer, output, extra;
    if (!(answer_file >> answer)) { std::cerr << "the jury's answer is empty\n"; return 1; }
    if (!(output_file >> output)) { std::cout << "0\n"; std::cerr << "Output isn't correct: it is empty\n"; return 0; }
    if (output_file >> extra) { std::cout << "0\n"; std::cerr << "Output isn't correct: extra tokens\n"; return 0; }
    if (output == answer) { std::cout << "1\n"; std::cerr << "Output is correct\n"; }
    else { std::cout << "0\n"; std::cerr << "Output isn't correct: expected " << answer << ", found " << output << "\n"; }
}
