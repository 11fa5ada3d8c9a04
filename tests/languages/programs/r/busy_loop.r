# Probe: spin forever on the CPU.
repeat {}
