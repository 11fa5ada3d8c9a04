# Probe: spin forever on the CPU.
loop {}
