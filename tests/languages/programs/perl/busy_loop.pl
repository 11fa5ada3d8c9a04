# Probe: spin forever on the CPU.
1 while 1;
