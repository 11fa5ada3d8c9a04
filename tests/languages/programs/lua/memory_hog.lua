-- Probe: keep distinct 1 MiB strings without bound.
local keep, s, i = {}, string.rep("x", 1 << 20), 0
while true do
    i = i + 1
    keep[i] = s .. i
end
