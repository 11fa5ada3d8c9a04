-- Probe: Lua spawns processes only through popen: open sleeping children
-- without bound; when popen fails (pids limit), print "contained".
local children = {}
for i = 1, 100000 do
    local child = io.popen("exec sleep 5")
    if not child then
        print("contained")
        os.exit(0)
    end
    children[i] = child
end
print("not contained")
os.exit(1)
