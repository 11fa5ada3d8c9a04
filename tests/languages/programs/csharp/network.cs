// Probe: TCP to 1.1.1.1:53 and 127.0.0.1:9 (2 s timeout each).
using System;
using System.Net.Sockets;
class Program {
    static bool Reach(string host, int port) {
        try {
            using (var c = new TcpClient()) {
                return c.ConnectAsync(host, port).Wait(2000) && c.Connected;
            }
        } catch (Exception) {
            return false;
        }
    }
    static void Main() {
        Console.WriteLine(Reach("1.1.1.1", 53) || Reach("127.0.0.1", 9) ? "reachable" : "unreachable");
    }
}
