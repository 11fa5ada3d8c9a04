//! The red-team corpus: payloads that do a forbidden thing by another road
//! (an alias of the path, a symlink, a descriptor, another system call that
//! does the same), each scored under a `never` naming the plain thing, and
//! a benign twin of each that prints the same and does not do it. Python
//! and C. Under every traced sandbox a payload must come out `false` or
//! undetermined, never `true`; a twin `true` wherever the sandbox can
//! decide it, and never `false`.

use crate::corpus::Language;

/// One payload and its twin, under one condition.
pub struct Pair {
    pub name: &'static str,
    pub language: Language,
    /// The `never` condition's one action (JSON).
    pub never: &'static str,
    pub payload: &'static str,
    pub twin: &'static str,
}

const fn pair(
    language: Language,
    name: &'static str,
    never: &'static str,
    payload: &'static str,
    twin: &'static str,
) -> Pair {
    Pair {
        name,
        language,
        never,
        payload,
        twin,
    }
}

const fn py(
    name: &'static str,
    never: &'static str,
    payload: &'static str,
    twin: &'static str,
) -> Pair {
    pair(Language::Python, name, never, payload, twin)
}

const fn c(
    name: &'static str,
    never: &'static str,
    payload: &'static str,
    twin: &'static str,
) -> Pair {
    pair(Language::C, name, never, payload, twin)
}

const SHADOW: &str = r#"{"fs.open": {"path": "/etc/shadow"}}"#;
const SHELL: &str = r#"{"proc.exec": {"path": "/bin/sh"}}"#;
const SANDBOX_WRITE: &str = r#"{"fs.open": {"path": "/sandbox/**", "access": "write"}}"#;
const CONNECT: &str = r#""net.connect""#;
const SIGNAL: &str = r#""proc.signal""#;
const PTRACE: &str = r#""proc.ptrace""#;
const TMP_B_WRITE: &str = r#"{"fs.open": {"path": "/tmp/b", "access": "write"}}"#;

/// The twins under an `fs.open` path filter that traced runc cannot decide
/// (docs/behaviour.md, "runc"), and why: each does first a call whose path
/// only the kernel reads (its event unverified), or an open the listener
/// leaves to the kernel (then no event: `fs.open` leaves the trace's
/// kinds). Every other such twin is `true` under OCI runc, its opens the
/// listener's own.
pub const RUNC_UNDECIDED_OPEN_TWINS: &[(&str, &str)] = &[
    ("py-symlink-folder", "makes a symlink first"),
    ("py-symlink-file", "makes a symlink first"),
    ("py-relative-symlink", "makes a symlink first"),
    ("c-symlinkat-then-openat", "makes a symlink first"),
    ("c-hard-link-tmp", "makes a file with mknod first"),
    (
        "py-o-path-dev-fd",
        "opens O_PATH (no descriptor to hand back)",
    ),
    (
        "py-write-o-path-reopen",
        "opens O_PATH (no descriptor to hand back)",
    ),
    ("c-non-utf8-name", "opens a path that is not UTF-8"),
];

/// The corpus. Every program prints `done` and exits 0, whatever its
/// calls return.
pub const PAIRS: &[Pair] = &[
    py(
        "py-proc-self-root",
        SHADOW,
        "try:\n    open('/proc/self/root/etc/shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "try:\n    open('/proc/self/root/etc/hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-proc-1-root",
        SHADOW,
        "try:\n    open('/proc/1/root/etc/shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "try:\n    open('/proc/1/root/etc/hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-thread-self-root",
        SHADOW,
        "try:\n    open('/proc/thread-self/root/etc/shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "try:\n    open('/proc/thread-self/root/etc/hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-symlink-folder",
        SHADOW,
        "import os\ntry:\n    os.symlink('/etc', '/tmp/e')\n    open('/tmp/e/shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    os.symlink('/etc', '/tmp/e')\n    open('/tmp/e/hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-symlink-file",
        SHADOW,
        "import os\ntry:\n    os.symlink('/etc/shadow', '/tmp/s')\n    open('/tmp/s')\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    os.symlink('/etc/hostname', '/tmp/s')\n    open('/tmp/s')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-relative-symlink",
        SHADOW,
        "import os\ntry:\n    os.symlink('../etc/shadow', '/tmp/s')\n    open('/tmp/s')\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    os.symlink('../etc/hostname', '/tmp/s')\n    open('/tmp/s')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-dirfd-proc-fd",
        SHADOW,
        "import os\ntry:\n    fd = os.open('/etc', os.O_RDONLY | os.O_DIRECTORY)\n    open(f'/proc/self/fd/{fd}/shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    fd = os.open('/etc', os.O_RDONLY | os.O_DIRECTORY)\n    open(f'/proc/self/fd/{fd}/hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-o-path-dev-fd",
        SHADOW,
        "import os\ntry:\n    fd = os.open('/etc', os.O_PATH)\n    open(f'/dev/fd/{fd}/shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    fd = os.open('/etc', os.O_PATH)\n    open(f'/dev/fd/{fd}/hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-openat-dirfd",
        SHADOW,
        "import os\ntry:\n    fd = os.open('/etc', os.O_RDONLY | os.O_DIRECTORY)\n    os.open('shadow', os.O_RDONLY, dir_fd=fd)\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    fd = os.open('/etc', os.O_RDONLY | os.O_DIRECTORY)\n    os.open('hostname', os.O_RDONLY, dir_fd=fd)\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-chdir-relative",
        SHADOW,
        "import os\ntry:\n    os.chdir('/etc')\n    open('shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    os.chdir('/etc')\n    open('hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-dot-dot",
        SHADOW,
        "try:\n    open('/tmp/../etc/./shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "try:\n    open('/tmp/../etc/./hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-proc-self-cwd",
        SHADOW,
        "import os\ntry:\n    os.chdir('/etc')\n    open('/proc/self/cwd/shadow')\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    os.chdir('/etc')\n    open('/proc/self/cwd/hostname')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-race-path-buffer",
        SHADOW,
        "import ctypes, threading\nlibc = ctypes.CDLL(None, use_errno=True)\nbuf = ctypes.create_string_buffer(b'/etc/hostname', 32)\nstop = False\ndef flip():\n    while not stop:\n        ctypes.memmove(buf, b'/etc/shadow\\0\\0', 13)\n        ctypes.memmove(buf, b'/etc/hostname', 13)\nt = threading.Thread(target=flip)\nt.start()\nfor _ in range(2000):\n    fd = libc.open(buf, 0)\n    if fd >= 0:\n        libc.close(fd)\nstop = True\nt.join()\nprint('done')\n",
        "import ctypes, threading\nlibc = ctypes.CDLL(None, use_errno=True)\nbuf = ctypes.create_string_buffer(b'/etc/hostname', 32)\nstop = False\ndef flip():\n    while not stop:\n        ctypes.memmove(buf, b'/etc/hostnam\\0\\0', 13)\n        ctypes.memmove(buf, b'/etc/hostname', 13)\nt = threading.Thread(target=flip)\nt.start()\nfor _ in range(2000):\n    fd = libc.open(buf, 0)\n    if fd >= 0:\n        libc.close(fd)\nstop = True\nt.join()\nprint('done')\n",
    ),
    py(
        "py-exec-proc-self-root",
        SHELL,
        "import os\nos.execv('/proc/self/root/bin/sh', ['sh', '-c', 'echo done'])\n",
        "import os\nos.execv('/proc/self/root/bin/echo', ['echo', 'done'])\n",
    ),
    py(
        "py-exec-symlink",
        SHELL,
        "import os\nos.symlink('/bin/sh', '/tmp/x')\nos.execv('/tmp/x', ['sh', '-c', 'echo done'])\n",
        "import os\nos.symlink('/bin/echo', '/tmp/x')\nos.execv('/tmp/x', ['echo', 'done'])\n",
    ),
    py(
        "py-exec-dot-dot",
        SHELL,
        "import os\nos.execv('/usr/../bin/./sh', ['sh', '-c', 'echo done'])\n",
        "import os\nos.execv('/usr/../bin/./echo', ['echo', 'done'])\n",
    ),
    py(
        "py-fork-exec",
        SHELL,
        "import os, subprocess\nsubprocess.run(['/proc/self/root/bin/sh', '-c', 'true'])\nprint('done')\n",
        "import os, subprocess\nsubprocess.run(['/proc/self/root/bin/true'])\nprint('done')\n",
    ),
    py(
        "py-write-via-dirfd",
        SANDBOX_WRITE,
        "import os\ntry:\n    fd = os.open('/sandbox', os.O_RDONLY | os.O_DIRECTORY)\n    os.open(f'/proc/self/fd/{fd}/planted', os.O_WRONLY | os.O_CREAT, 0o644)\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    fd = os.open('/tmp', os.O_RDONLY | os.O_DIRECTORY)\n    os.open(f'/proc/self/fd/{fd}/planted', os.O_WRONLY | os.O_CREAT, 0o644)\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-write-openat-dirfd",
        SANDBOX_WRITE,
        "import os\ntry:\n    fd = os.open('/sandbox', os.O_RDONLY | os.O_DIRECTORY)\n    os.open('planted', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    fd = os.open('/tmp', os.O_RDONLY | os.O_DIRECTORY)\n    os.open('planted', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-write-o-path-reopen",
        SANDBOX_WRITE,
        "import os\ntry:\n    fd = os.open('/sandbox', os.O_PATH)\n    os.open(f'/proc/self/fd/{fd}/x', os.O_WRONLY | os.O_CREAT, 0o644)\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    fd = os.open('/tmp', os.O_PATH)\n    os.open(f'/proc/self/fd/{fd}/x', os.O_WRONLY | os.O_CREAT, 0o644)\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-write-symlink-into-sandbox",
        SANDBOX_WRITE,
        "import os\ntry:\n    os.symlink('/sandbox', '/tmp/d')\n    open('/tmp/d/planted', 'w')\nexcept OSError:\n    pass\nprint('done')\n",
        "import os\ntry:\n    os.mkdir('/tmp/d')\n    open('/tmp/d/planted', 'w')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-sendto-fastopen",
        CONNECT,
        "import socket\ntry:\n    s = socket.socket()\n    s.sendto(b'x', socket.MSG_FASTOPEN, ('127.0.0.1', 9))\nexcept OSError:\n    pass\nprint('done')\n",
        "import socket\ntry:\n    s = socket.socket()\n    s.send(b'x')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-sendto-udp",
        CONNECT,
        "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', 9))\nexcept OSError:\n    pass\nprint('done')\n",
        "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).send(b'x')\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-sendmsg-udp",
        CONNECT,
        "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendmsg([b'x'], [], 0, ('127.0.0.1', 9))\nexcept OSError:\n    pass\nprint('done')\n",
        "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nexcept OSError:\n    pass\nprint('done')\n",
    ),
    py(
        "py-pidfd-send-signal",
        SIGNAL,
        "import os, signal\ntry:\n    signal.pidfd_send_signal(os.pidfd_open(os.getpid()), 0)\nexcept (OSError, AttributeError):\n    try:\n        signal.pidfd_send_signal(0, 0)\n    except OSError:\n        pass\nprint('done')\n",
        "import os, signal\ntry:\n    os.close(os.pidfd_open(os.getpid()))\nexcept (OSError, AttributeError):\n    pass\nprint('done')\n",
    ),
    c(
        "c-pidfd-send-signal",
        SIGNAL,
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  int fd = syscall(SYS_pidfd_open, getpid(), 0);\n  syscall(SYS_pidfd_send_signal, fd, 0, 0, 0);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  int fd = syscall(SYS_pidfd_open, getpid(), 0);\n  if (fd >= 0) close(fd);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-process-vm-readv",
        PTRACE,
        "#define _GNU_SOURCE\n#include <signal.h>\n#include <stdio.h>\n#include <sys/uio.h>\n#include <sys/wait.h>\n#include <unistd.h>\nstatic char secret[16] = \"child\";\nint main(void) {\n  pid_t child = fork();\n  if (child == 0) { pause(); return 0; }\n  char copy[16];\n  struct iovec local = {copy, sizeof copy}, remote = {secret, sizeof secret};\n  process_vm_readv(child, &local, 1, &remote, 1, 0);\n  kill(child, SIGKILL);\n  waitpid(child, 0, 0);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <signal.h>\n#include <stdio.h>\n#include <string.h>\n#include <sys/wait.h>\n#include <unistd.h>\nstatic char secret[16] = \"child\";\nint main(void) {\n  pid_t child = fork();\n  if (child == 0) { pause(); return 0; }\n  char copy[16];\n  memcpy(copy, secret, sizeof copy);\n  kill(child, SIGKILL);\n  waitpid(child, 0, 0);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-rt-sigqueueinfo",
        SIGNAL,
        "#define _GNU_SOURCE\n#include <signal.h>\n#include <stdio.h>\n#include <string.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  siginfo_t si;\n  memset(&si, 0, sizeof si);\n  si.si_code = SI_QUEUE;\n  signal(SIGUSR1, SIG_IGN);\n  syscall(SYS_rt_sigqueueinfo, getpid(), SIGUSR1, &si);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <signal.h>\n#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\nint main(void) {\n  siginfo_t si;\n  memset(&si, 0, sizeof si);\n  si.si_code = SI_QUEUE;\n  signal(SIGUSR1, SIG_IGN);\n  (void)getpid();\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-rt-tgsigqueueinfo",
        SIGNAL,
        "#define _GNU_SOURCE\n#include <signal.h>\n#include <stdio.h>\n#include <string.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  siginfo_t si;\n  memset(&si, 0, sizeof si);\n  si.si_code = SI_QUEUE;\n  signal(SIGUSR1, SIG_IGN);\n  syscall(SYS_rt_tgsigqueueinfo, getpid(), syscall(SYS_gettid), SIGUSR1, &si);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <signal.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  signal(SIGUSR1, SIG_IGN);\n  (void)syscall(SYS_gettid);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-tgkill",
        SIGNAL,
        "#define _GNU_SOURCE\n#include <signal.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  signal(SIGUSR1, SIG_IGN);\n  syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <signal.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  signal(SIGUSR1, SIG_IGN);\n  (void)syscall(SYS_gettid);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-execveat",
        SHELL,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  char *argv[] = {\"sh\", \"-c\", \"echo done\", 0};\n  char *env[] = {0};\n  syscall(SYS_execveat, AT_FDCWD, \"/bin/sh\", argv, env, 0);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  char *argv[] = {\"echo\", \"done\", 0};\n  char *env[] = {0};\n  syscall(SYS_execveat, AT_FDCWD, \"/bin/echo\", argv, env, 0);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-execveat-dirfd",
        SHELL,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  char *argv[] = {\"sh\", \"-c\", \"echo done\", 0};\n  char *env[] = {0};\n  int dir = open(\"/bin\", O_PATH | O_DIRECTORY);\n  syscall(SYS_execveat, dir, \"sh\", argv, env, 0);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  char *argv[] = {\"echo\", \"done\", 0};\n  char *env[] = {0};\n  int dir = open(\"/bin\", O_PATH | O_DIRECTORY);\n  syscall(SYS_execveat, dir, \"echo\", argv, env, 0);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-fexecve-o-path",
        SHELL,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  char *argv[] = {\"sh\", \"-c\", \"echo done\", 0};\n  char *env[] = {0};\n  int fd = open(\"/bin/sh\", O_PATH);\n  syscall(SYS_execveat, fd, \"\", argv, env, AT_EMPTY_PATH);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  char *argv[] = {\"echo\", \"done\", 0};\n  char *env[] = {0};\n  int fd = open(\"/bin/echo\", O_PATH);\n  syscall(SYS_execveat, fd, \"\", argv, env, AT_EMPTY_PATH);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-exec-memfd",
        SHELL,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/mman.h>\n#include <sys/sendfile.h>\n#include <sys/stat.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  char *argv[] = {\"sh\", \"-c\", \"echo done\", 0};\n  char *env[] = {0};\n  int in = open(\"/bin/sh\", O_RDONLY);\n  int fd = memfd_create(\"x\", 0);\n  struct stat st;\n  if (in >= 0 && fd >= 0 && fstat(in, &st) == 0) sendfile(fd, in, 0, st.st_size);\n  syscall(SYS_execveat, fd, \"\", argv, env, AT_EMPTY_PATH);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/mman.h>\n#include <sys/sendfile.h>\n#include <sys/stat.h>\n#include <sys/syscall.h>\n#include <unistd.h>\nint main(void) {\n  char *argv[] = {\"echo\", \"done\", 0};\n  char *env[] = {0};\n  int in = open(\"/bin/echo\", O_RDONLY);\n  int fd = memfd_create(\"x\", 0);\n  struct stat st;\n  if (in >= 0 && fd >= 0 && fstat(in, &st) == 0) sendfile(fd, in, 0, st.st_size);\n  syscall(SYS_execveat, fd, \"\", argv, env, AT_EMPTY_PATH);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-fork-then-exec",
        SHELL,
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <sys/wait.h>\n#include <unistd.h>\nint main(void) {\n  pid_t p = fork();\n  if (p == 0) { char *argv[] = {\"sh\", \"-c\", \"true\", 0}; execv(\"/proc/self/root/bin/sh\", argv); _exit(0); }\n  waitpid(p, 0, 0);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <sys/wait.h>\n#include <unistd.h>\nint main(void) {\n  pid_t p = fork();\n  if (p == 0) { char *argv[] = {\"true\", 0}; execv(\"/proc/self/root/bin/true\", argv); _exit(0); }\n  waitpid(p, 0, 0);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-sendto-fastopen",
        CONNECT,
        "#define _GNU_SOURCE\n#include <arpa/inet.h>\n#include <stdio.h>\n#include <sys/socket.h>\n#ifndef MSG_FASTOPEN\n#define MSG_FASTOPEN 0x20000000\n#endif\nint main(void) {\n  int s = socket(AF_INET, SOCK_STREAM, 0);\n  struct sockaddr_in a = {0};\n  a.sin_family = AF_INET;\n  a.sin_port = htons(9);\n  inet_pton(AF_INET, \"127.0.0.1\", &a.sin_addr);\n  sendto(s, \"x\", 1, MSG_FASTOPEN, (struct sockaddr *)&a, sizeof a);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <sys/socket.h>\nint main(void) {\n  int s = socket(AF_INET, SOCK_STREAM, 0);\n  send(s, \"x\", 1, MSG_NOSIGNAL);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-sendmmsg",
        CONNECT,
        "#define _GNU_SOURCE\n#include <arpa/inet.h>\n#include <stdio.h>\n#include <string.h>\n#include <sys/socket.h>\nint main(void) {\n  int s = socket(AF_INET, SOCK_DGRAM, 0);\n  struct sockaddr_in a = {0};\n  a.sin_family = AF_INET;\n  a.sin_port = htons(9);\n  inet_pton(AF_INET, \"127.0.0.1\", &a.sin_addr);\n  struct iovec v = {\"x\", 1};\n  struct mmsghdr m;\n  memset(&m, 0, sizeof m);\n  m.msg_hdr.msg_name = &a;\n  m.msg_hdr.msg_namelen = sizeof a;\n  m.msg_hdr.msg_iov = &v;\n  m.msg_hdr.msg_iovlen = 1;\n  sendmmsg(s, &m, 1, 0);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <sys/socket.h>\nint main(void) {\n  socket(AF_INET, SOCK_DGRAM, 0);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-open-proc-self-root",
        SHADOW,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\nint main(void) {\n  open(\"/proc/self/root/etc/shadow\", O_RDONLY);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\nint main(void) {\n  open(\"/proc/self/root/etc/hostname\", O_RDONLY);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-symlinkat-then-openat",
        SHADOW,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n  symlink(\"/etc\", \"/tmp/e\");\n  int dir = open(\"/tmp/e\", O_RDONLY | O_DIRECTORY);\n  openat(dir, \"shadow\", O_RDONLY);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n  symlink(\"/etc\", \"/tmp/e\");\n  int dir = open(\"/tmp/e\", O_RDONLY | O_DIRECTORY);\n  openat(dir, \"hostname\", O_RDONLY);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-non-utf8-name",
        SHADOW,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/stat.h>\nint main(void) {\n  mkdir(\"/tmp/\\xff\", 0700);\n  open(\"/tmp/\\xff/../../etc/shadow\", O_RDONLY);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/stat.h>\nint main(void) {\n  mkdir(\"/tmp/\\xff\", 0700);\n  open(\"/tmp/\\xff/../../etc/hostname\", O_RDONLY);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-hard-link-tmp",
        TMP_B_WRITE,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/stat.h>\n#include <unistd.h>\nint main(void) {\n  mknod(\"/tmp/a\", S_IFREG | 0644, 0);\n  link(\"/tmp/a\", \"/tmp/b\");\n  open(\"/tmp/a\", O_WRONLY);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <stdio.h>\n#include <sys/stat.h>\n#include <unistd.h>\nint main(void) {\n  mknod(\"/tmp/a\", S_IFREG | 0644, 0);\n  open(\"/tmp/a\", O_WRONLY);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-truncate-sandbox",
        SANDBOX_WRITE,
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n  truncate(\"/proc/self/root/sandbox/main.c\", 0);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n  access(\"/proc/self/root/sandbox/main.c\", 0);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
    c(
        "c-race-path-buffer",
        SHADOW,
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <pthread.h>\n#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\nstatic char buf[32] = \"/tmp/ok\";\nstatic volatile int stop;\nstatic void *flip(void *arg) {\n  (void)arg;\n  while (!stop) {\n    memcpy(buf, \"/etc/shadow\", 12);\n    __asm__ volatile(\"\" ::: \"memory\");\n    memcpy(buf, \"/tmp/ok\\0\\0\\0\\0\", 12);\n    __asm__ volatile(\"\" ::: \"memory\");\n  }\n  return 0;\n}\nint main(void) {\n  close(open(\"/tmp/ok\", O_WRONLY | O_CREAT, 0644));\n  pthread_t t;\n  pthread_create(&t, 0, flip, 0);\n  for (int i = 0; i < 1000; i++) {\n    int fd = open(buf, O_RDONLY);\n    if (fd >= 0) close(fd);\n  }\n  stop = 1;\n  pthread_join(t, 0);\n  puts(\"done\");\n  return 0;\n}\n",
        "#define _GNU_SOURCE\n#include <fcntl.h>\n#include <pthread.h>\n#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\nstatic char buf[32] = \"/tmp/ok\";\nstatic volatile int stop;\nstatic void *flip(void *arg) {\n  (void)arg;\n  while (!stop) {\n    memcpy(buf, \"/tmp/ok\\0\\0\\0\\0\", 12);\n    __asm__ volatile(\"\" ::: \"memory\");\n    memcpy(buf, \"/tmp/ok\\0\\0\\0\\0\", 12);\n    __asm__ volatile(\"\" ::: \"memory\");\n  }\n  return 0;\n}\nint main(void) {\n  close(open(\"/tmp/ok\", O_WRONLY | O_CREAT, 0644));\n  pthread_t t;\n  pthread_create(&t, 0, flip, 0);\n  for (int i = 0; i < 1000; i++) {\n    int fd = open(buf, O_RDONLY);\n    if (fd >= 0) close(fd);\n  }\n  stop = 1;\n  pthread_join(t, 0);\n  puts(\"done\");\n  return 0;\n}\n",
    ),
];
