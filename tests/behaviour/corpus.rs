//! The red-team corpus: programs with one side effect each (the action kind
//! a trace must record) and benign programs (no action at all), in Python
//! and C. Every program catches its own failure and exits 0 printing
//! nothing, so that a verdict about it can only come from its behaviour.

/// A corpus program.
pub struct Program {
    pub name: &'static str,
    pub language: Language,
    /// The action kind its side effect is (`None`: benign).
    pub kind: Option<&'static str>,
    pub source: &'static str,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Language {
    Python,
    C,
}

const fn py(name: &'static str, kind: &'static str, source: &'static str) -> Program {
    Program {
        name,
        language: Language::Python,
        kind: Some(kind),
        source,
    }
}

const fn c(name: &'static str, kind: &'static str, source: &'static str) -> Program {
    Program {
        name,
        language: Language::C,
        kind: Some(kind),
        source,
    }
}

const fn benign_py(name: &'static str, source: &'static str) -> Program {
    Program {
        name,
        language: Language::Python,
        kind: None,
        source,
    }
}

const fn benign_c(name: &'static str, source: &'static str) -> Program {
    Program {
        name,
        language: Language::C,
        kind: None,
        source,
    }
}

/// Programs with one side effect each.
pub const SIDE_EFFECTS: &[Program] = &[
    py(
        "py-connect-outside",
        "net.connect",
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 443), timeout=2)\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-connect-loopback",
        "net.connect",
        "import socket\ns = socket.socket()\ntry:\n    s.connect(('127.0.0.1', 9))\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-connect-ipv6",
        "net.connect",
        "import socket\ntry:\n    s = socket.socket(socket.AF_INET6)\n    s.connect(('::1', 80))\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-connect-unix",
        "net.connect",
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('/tmp/nowhere.sock')\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-connect-private",
        "net.connect",
        "import socket\ntry:\n    socket.create_connection(('10.0.0.1', 22), timeout=2)\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-dns-lookup",
        "net.socket",
        "import socket\ntry:\n    socket.getaddrinfo('example.com', 80)\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-socket-only",
        "net.socket",
        "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-udp-send",
        "net.socket",
        "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-bind",
        "net.bind",
        "import socket\ntry:\n    socket.socket().bind(('0.0.0.0', 8080))\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-listen-loopback",
        "net.bind",
        "import socket\ntry:\n    s = socket.socket()\n    s.bind(('127.0.0.1', 0))\n    s.listen()\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-urlopen",
        "net.socket",
        "import urllib.request\ntry:\n    urllib.request.urlopen('http://example.com', timeout=2)\nexcept Exception:\n    pass\n",
    ),
    py(
        "py-os-system",
        "proc.exec",
        "import os\nos.system('true')\n",
    ),
    py(
        "py-subprocess-sh",
        "proc.exec",
        "import subprocess\ntry:\n    subprocess.run(['/bin/sh', '-c', 'exit 0'])\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-execv",
        "proc.exec",
        "import os\ntry:\n    os.execv('/bin/sh', ['sh', '-c', 'exit 0'])\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-curl",
        "proc.exec",
        "import subprocess\ntry:\n    subprocess.run(['curl', '-s', 'http://example.com'])\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-wget",
        "proc.exec",
        "import subprocess\ntry:\n    subprocess.run(['wget', '-q', 'http://example.com'])\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-fork",
        "proc.spawn",
        "import os\ntry:\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-fork-many",
        "proc.spawn",
        "import os\nkids = []\nfor _ in range(20):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        os._exit(0)\n    kids.append(pid)\nfor pid in kids:\n    os.waitpid(pid, 0)\n",
    ),
    py(
        "py-fork-bomb",
        "proc.spawn",
        "import os\nfor _ in range(200):\n    try:\n        if os.fork() == 0:\n            import time\n            time.sleep(0.5)\n            os._exit(0)\n    except OSError:\n        break\n",
    ),
    py(
        "py-write-sandbox",
        "fs.open",
        "try:\n    open('/sandbox/out.txt', 'w').write('x')\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-write-tmp",
        "fs.open",
        "open('/tmp/out.txt', 'w').write('left behind')\n",
    ),
    py(
        "py-append-passwd",
        "fs.open",
        "try:\n    open('/etc/passwd', 'a').write('evil::0:0::/:/bin/sh\\n')\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-read-shadow",
        "fs.open",
        "try:\n    open('/etc/shadow').read()\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-read-environ",
        "fs.open",
        "try:\n    open('/proc/1/environ', 'rb').read()\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-read-root",
        "fs.open",
        "try:\n    open('/root/.bashrc').read()\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-tempfile",
        "fs.open",
        "import tempfile\nwith tempfile.TemporaryFile() as f:\n    f.write(b'x')\n",
    ),
    py(
        "py-signal-pid1",
        "proc.signal",
        "import os\ntry:\n    os.kill(1, 0)\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-signal-self",
        "proc.signal",
        "import os\ntry:\n    os.kill(os.getpid(), 0)\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-ptrace-traceme",
        "proc.ptrace",
        "import ctypes\nctypes.CDLL(None, use_errno=True).ptrace(0, 0, None, None)\n",
    ),
    py(
        "py-ptrace-attach",
        "proc.ptrace",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\npid = os.fork()\nif pid == 0:\n    import time\n    time.sleep(1)\n    os._exit(0)\nlibc.ptrace(16, pid, None, None)\nos.kill(pid, 9)\nos.waitpid(pid, 0)\n",
    ),
    py(
        "py-unlink",
        "fs.unlink",
        "import os\ntry:\n    os.unlink('/tmp/nothing-here')\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-rename",
        "fs.rename",
        "import os\ntry:\n    os.rename('/tmp/a', '/tmp/b')\nexcept OSError:\n    pass\n",
    ),
    py(
        "py-remove-program",
        "fs.unlink",
        "import os\ntry:\n    os.remove('/sandbox/program')\nexcept OSError:\n    pass\n",
    ),
    c(
        "c-connect",
        "net.connect",
        "#include <arpa/inet.h>\n#include <sys/socket.h>\nint main(void) {\n  int s = socket(AF_INET, SOCK_STREAM, 0);\n  struct sockaddr_in a = {0};\n  a.sin_family = AF_INET;\n  a.sin_port = htons(443);\n  inet_pton(AF_INET, \"1.1.1.1\", &a.sin_addr);\n  connect(s, (struct sockaddr *)&a, sizeof a);\n  return 0;\n}\n",
    ),
    c(
        "c-socket",
        "net.socket",
        "#include <sys/socket.h>\nint main(void) { socket(AF_INET, SOCK_DGRAM, 0); return 0; }\n",
    ),
    c(
        "c-bind",
        "net.bind",
        "#include <arpa/inet.h>\n#include <sys/socket.h>\nint main(void) {\n  int s = socket(AF_INET, SOCK_STREAM, 0);\n  struct sockaddr_in a = {0};\n  a.sin_family = AF_INET;\n  a.sin_port = htons(8080);\n  bind(s, (struct sockaddr *)&a, sizeof a);\n  return 0;\n}\n",
    ),
    c(
        "c-getaddrinfo",
        "net.socket",
        "#include <netdb.h>\nint main(void) { struct addrinfo *r; getaddrinfo(\"example.com\", \"80\", 0, &r); return 0; }\n",
    ),
    c(
        "c-execve-sh",
        "proc.exec",
        "#include <unistd.h>\nint main(void) { char *argv[] = {\"sh\", \"-c\", \"exit 0\", 0}; execve(\"/bin/sh\", argv, 0); return 0; }\n",
    ),
    c(
        "c-system",
        "proc.exec",
        "#include <stdlib.h>\nint main(void) { system(\"true\"); return 0; }\n",
    ),
    c(
        "c-execvp-curl",
        "proc.exec",
        "#include <unistd.h>\nint main(void) { char *argv[] = {\"curl\", \"http://example.com\", 0}; execvp(\"curl\", argv); return 0; }\n",
    ),
    c(
        "c-fork",
        "proc.spawn",
        "#include <sys/wait.h>\n#include <unistd.h>\nint main(void) { pid_t p = fork(); if (p == 0) _exit(0); if (p > 0) waitpid(p, 0, 0); return 0; }\n",
    ),
    c(
        "c-vfork",
        "proc.spawn",
        "#include <unistd.h>\n#include <sys/wait.h>\nint main(void) { pid_t p = vfork(); if (p == 0) _exit(0); if (p > 0) waitpid(p, 0, 0); return 0; }\n",
    ),
    c(
        "c-kill-pid1",
        "proc.signal",
        "#include <signal.h>\nint main(void) { kill(1, 0); return 0; }\n",
    ),
    c(
        "c-raise",
        "proc.signal",
        "#include <signal.h>\nstatic void on(int s) { (void)s; }\nint main(void) { signal(SIGUSR1, on); raise(SIGUSR1); return 0; }\n",
    ),
    c(
        "c-ptrace",
        "proc.ptrace",
        "#include <sys/ptrace.h>\nint main(void) { ptrace(PTRACE_TRACEME, 0, 0, 0); return 0; }\n",
    ),
    c(
        "c-write-tmp",
        "fs.open",
        "#include <stdio.h>\nint main(void) { FILE *f = fopen(\"/tmp/x\", \"w\"); if (f) fclose(f); return 0; }\n",
    ),
    c(
        "c-write-sandbox",
        "fs.open",
        "#include <stdio.h>\nint main(void) { FILE *f = fopen(\"/sandbox/x\", \"w\"); if (f) fclose(f); return 0; }\n",
    ),
    c(
        "c-read-shadow",
        "fs.open",
        "#include <fcntl.h>\nint main(void) { open(\"/etc/shadow\", O_RDONLY); return 0; }\n",
    ),
    c(
        "c-unlink",
        "fs.unlink",
        "#include <unistd.h>\nint main(void) { unlink(\"/tmp/none\"); return 0; }\n",
    ),
    c(
        "c-rename",
        "fs.rename",
        "#include <stdio.h>\nint main(void) { rename(\"/tmp/a\", \"/tmp/b\"); return 0; }\n",
    ),
];

/// Programs that try nothing a trace records.
pub const BENIGN: &[Program] = &[
    benign_py("py-print", "print(6 * 7)\n"),
    benign_py("py-sum", "print(sum(range(1000)))\n"),
    benign_py("py-strings", "print('abc'.upper(), 'x'.join('yz'))\n"),
    benign_py(
        "py-list-comprehension",
        "print([i * i for i in range(10)])\n",
    ),
    benign_py(
        "py-dict",
        "d = {k: len(k) for k in ['a', 'bb']}\nprint(sorted(d.items()))\n",
    ),
    benign_py("py-sort", "print(sorted([3, 1, 2], reverse=True))\n"),
    benign_py(
        "py-recursion",
        "def f(n):\n    return 1 if n < 2 else n * f(n - 1)\nprint(f(20))\n",
    ),
    benign_py(
        "py-class",
        "class A:\n    def __init__(self):\n        self.x = 1\nprint(A().x)\n",
    ),
    benign_py(
        "py-exception",
        "try:\n    1 / 0\nexcept ZeroDivisionError:\n    print('caught')\n",
    ),
    benign_py("py-math", "import math\nprint(math.sqrt(2), math.pi)\n"),
    benign_py("py-json", "import json\nprint(json.dumps({'a': [1, 2]}))\n"),
    benign_py(
        "py-re",
        "import re\nprint(re.findall(r'\\d+', 'a1b22c333'))\n",
    ),
    benign_py(
        "py-itertools",
        "import itertools\nprint(list(itertools.permutations('abc', 2)))\n",
    ),
    benign_py(
        "py-collections",
        "import collections\nprint(collections.Counter('mississippi').most_common(2))\n",
    ),
    benign_py(
        "py-heapq",
        "import heapq\nh = [5, 1, 4]\nheapq.heapify(h)\nprint(heapq.heappop(h))\n",
    ),
    benign_py(
        "py-bisect",
        "import bisect\nprint(bisect.bisect([1, 3, 5], 4))\n",
    ),
    benign_py(
        "py-functools",
        "import functools\n@functools.lru_cache\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nprint(fib(50))\n",
    ),
    benign_py(
        "py-decimal",
        "from decimal import Decimal\nprint(Decimal('0.1') + Decimal('0.2'))\n",
    ),
    benign_py(
        "py-fractions",
        "from fractions import Fraction\nprint(Fraction(1, 3) + Fraction(1, 6))\n",
    ),
    benign_py(
        "py-dataclass",
        "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\nprint(P(3))\n",
    ),
    benign_py("py-struct", "import struct\nprint(struct.pack('<I', 1))\n"),
    benign_py(
        "py-base64",
        "import base64\nprint(base64.b64encode(b'hello'))\n",
    ),
    benign_py(
        "py-hashlib",
        "import hashlib\nprint(hashlib.sha256(b'x').hexdigest())\n",
    ),
    benign_py(
        "py-statistics",
        "import statistics\nprint(statistics.mean([1, 2, 3, 4]))\n",
    ),
    benign_py(
        "py-textwrap",
        "import textwrap\nprint(textwrap.fill('word ' * 30, 20))\n",
    ),
    benign_py("py-stdin", "import sys\nprint(len(sys.stdin.read()))\n"),
    benign_py("py-argv", "import sys\nprint(sys.argv[1:])\n"),
    benign_py(
        "py-generator",
        "def g():\n    yield from range(3)\nprint(list(g()))\n",
    ),
    benign_py(
        "py-threads",
        "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(1))\nt.start()\nt.join()\nprint(out)\n",
    ),
    benign_py("py-exit-zero", "import sys\nsys.exit(0)\n"),
    benign_c(
        "c-hello",
        "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n",
    ),
    benign_c(
        "c-loop",
        "#include <stdio.h>\nint main(void) { long s = 0; for (int i = 0; i < 1000000; i++) s += i; printf(\"%ld\\n\", s); return 0; }\n",
    ),
    benign_c(
        "c-malloc",
        "#include <stdlib.h>\n#include <string.h>\nint main(void) { char *p = malloc(1 << 20); memset(p, 1, 1 << 20); free(p); return 0; }\n",
    ),
    benign_c(
        "c-qsort",
        "#include <stdio.h>\n#include <stdlib.h>\nstatic int cmp(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }\nint main(void) { int v[] = {3, 1, 2}; qsort(v, 3, sizeof *v, cmp); printf(\"%d\\n\", v[0]); return 0; }\n",
    ),
    benign_c(
        "c-strings",
        "#include <stdio.h>\n#include <string.h>\nint main(void) { char b[32]; strcpy(b, \"abc\"); strcat(b, \"def\"); printf(\"%zu\\n\", strlen(b)); return 0; }\n",
    ),
    benign_c(
        "c-math",
        "#include <math.h>\n#include <stdio.h>\nint main(void) { printf(\"%f\\n\", sqrt(2.0)); return 0; }\n",
    ),
    benign_c(
        "c-recursion",
        "#include <stdio.h>\nstatic long f(int n) { return n < 2 ? n : f(n - 1) + f(n - 2); }\nint main(void) { printf(\"%ld\\n\", f(25)); return 0; }\n",
    ),
    benign_c(
        "c-stdin",
        "#include <stdio.h>\nint main(void) { int c, n = 0; while ((c = getchar()) != EOF) n++; printf(\"%d\\n\", n); return 0; }\n",
    ),
    benign_c(
        "c-argv",
        "#include <stdio.h>\nint main(int argc, char **argv) { for (int i = 1; i < argc; i++) puts(argv[i]); return 0; }\n",
    ),
    benign_c(
        "c-struct",
        "#include <stdio.h>\nstruct p { int x, y; };\nint main(void) { struct p a = {1, 2}; printf(\"%d\\n\", a.x + a.y); return 0; }\n",
    ),
    benign_c(
        "c-array",
        "#include <stdio.h>\nint main(void) { int a[100]; for (int i = 0; i < 100; i++) a[i] = i * i; printf(\"%d\\n\", a[99]); return 0; }\n",
    ),
    benign_c(
        "c-sprintf",
        "#include <stdio.h>\nint main(void) { char b[64]; snprintf(b, sizeof b, \"%d-%s\", 7, \"x\"); puts(b); return 0; }\n",
    ),
    benign_c(
        "c-bits",
        "#include <stdio.h>\nint main(void) { unsigned x = 0xF0F0; printf(\"%d\\n\", __builtin_popcount(x)); return 0; }\n",
    ),
    benign_c(
        "c-switch",
        "#include <stdio.h>\nint main(void) { for (int i = 0; i < 3; i++) switch (i) { case 0: puts(\"a\"); break; default: puts(\"b\"); } return 0; }\n",
    ),
    benign_c(
        "c-exit",
        "#include <stdlib.h>\nint main(void) { exit(0); }\n",
    ),
    benign_c(
        "c-stderr",
        "#include <stdio.h>\nint main(void) { fputs(\"note\\n\", stderr); return 0; }\n",
    ),
    benign_c(
        "c-pointer",
        "#include <stdio.h>\nint main(void) { int x = 5; int *p = &x; *p += 1; printf(\"%d\\n\", x); return 0; }\n",
    ),
    benign_c(
        "c-matrix",
        "#include <stdio.h>\nint main(void) { int m[3][3] = {{1,0,0},{0,1,0},{0,0,1}}; int t = 0; for (int i = 0; i < 3; i++) t += m[i][i]; printf(\"%d\\n\", t); return 0; }\n",
    ),
    benign_c(
        "c-strtol",
        "#include <stdio.h>\n#include <stdlib.h>\nint main(void) { printf(\"%ld\\n\", strtol(\"42\", 0, 10)); return 0; }\n",
    ),
    benign_c(
        "c-calloc",
        "#include <stdlib.h>\nint main(void) { int *p = calloc(100, sizeof *p); int r = p[5]; free(p); return r; }\n",
    ),
];
