// Probe: fork sleeping children without bound; when fork fails, "contained".
import core.sys.posix.unistd : fork, sleep, _exit;
import std.stdio;
void main() {
    foreach (i; 0 .. 100_000) {
        auto pid = fork();
        if (pid < 0) { writeln("contained"); return; }
        if (pid == 0) { sleep(5); _exit(0); }
    }
    writeln("not contained");
}
