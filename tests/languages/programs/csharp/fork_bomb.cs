// Probe: start sleeping children without bound; when a start fails, "contained".
using System;
using System.Diagnostics;
class Program {
    static void Main() {
        for (int i = 0; i < 100000; i++) {
            try {
                Process.Start(new ProcessStartInfo("/bin/sleep", "5") { UseShellExecute = false });
            } catch (Exception e) {
                Console.Error.WriteLine("start failed after " + i + " children: " + e.Message);
                Console.WriteLine("contained");
                Environment.Exit(0);
            }
        }
        Console.WriteLine("not contained");
        Environment.Exit(1);
    }
}
