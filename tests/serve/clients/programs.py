"""The programs every client script sends: one of each kind (correct, wrong,
crashing, looping, compile error, memory hog) in Python and C++. Each reads
a number n on stdin and prints n * n when correct (n * n + 1 when wrong).
"""

PY = {
    "correct": "n = int(input())\nprint(n * n)\n",
    "wrong": "n = int(input())\nprint(n * n + 1)\n",
    "crash": "raise RuntimeError(\"boom\")\n",
    "loop": "while True:\n    pass\n",
    "compile_error": "def f(:\n    pass\n",
    "memory_hog": "x = bytearray(1 << 30)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\nprint(len(x))\n",
}
CPP = {
    "correct": "#include <iostream>\nint main(){long n; std::cin>>n; std::cout<<n*n<<std::endl;}\n",
    "wrong": "#include <iostream>\nint main(){long n; std::cin>>n; std::cout<<n*n+1<<std::endl;}\n",
    "crash": "#include <cstdlib>\nint main(){ std::abort(); }\n",
    "loop": "int main(){ volatile long i = 0; for(;;) i++; }\n",
    "compile_error": "int main() { return 0 }\n",
    "memory_hog": "#include <vector>\n#include <cstdio>\nint main(){ std::vector<char> v(1ul<<30, 1); std::printf(\"%d\\n\", (int)v[12345]); }\n",
}
