// Does not compile: mcs exits 1.
class Program { static void Main() { int x = ; } }
