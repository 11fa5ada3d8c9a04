# Probe: spin forever on the CPU.
while :; do :; done
