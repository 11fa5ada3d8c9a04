// Probe: spin forever on the CPU.
let counter = 0;
while (true) { counter++; }
