// Does not compile: gdc exits 1.
void main() { int x = ; }
