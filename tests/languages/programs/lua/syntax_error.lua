-- Does not parse: lua exits 1.
local x = = 1
