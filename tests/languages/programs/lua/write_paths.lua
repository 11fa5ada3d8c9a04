-- Probe: open arg[1], /build/probe and /etc/probe for appending.
for _, p in ipairs({arg[1] or "", "/build/probe", "/etc/probe"}) do
    local f = io.open(p, "a")
    if f then f:close() print("written") else print("denied") end
end
