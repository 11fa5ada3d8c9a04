-- Probe: spin forever on the CPU.
while true do end
