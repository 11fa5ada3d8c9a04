// Probe: TCP to 1.1.1.1:53 and 127.0.0.1:9.
import std.socket;
import std.stdio;
bool reach(string host, ushort port) {
    try {
        auto s = new TcpSocket(new InternetAddress(host, port));
        s.close();
        return true;
    } catch (Exception e) {
        return false;
    }
}
void main() {
    writeln(reach("1.1.1.1", 53) || reach("127.0.0.1", 9) ? "reachable" : "unreachable");
}
