// Probe: open args[1], /build/probe and /etc/probe for appending.
import std.stdio;
void main(string[] args) {
    foreach (p; [args.length > 1 ? args[1] : "", "/build/probe", "/etc/probe"]) {
        try {
            File(p, "a").close();
            writeln("written");
        } catch (Exception e) {
            writeln("denied");
        }
    }
}
