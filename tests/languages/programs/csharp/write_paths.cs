// Probe: open args[0], /build/probe and /etc/probe for appending.
using System;
using System.IO;
class Program {
    static void Main(string[] args) {
        foreach (var p in new[] { args.Length > 0 ? args[0] : "", "/build/probe", "/etc/probe" }) {
            try {
                File.AppendAllText(p, "");
                Console.WriteLine("written");
            } catch (Exception) {
                Console.WriteLine("denied");
            }
        }
    }
}
