<?php
// Probe: open $argv[1], /build/probe and /etc/probe for appending.
foreach ([$argv[1] ?? "", "/build/probe", "/etc/probe"] as $p) {
    $f = @fopen($p, "a");
    if ($f) { fclose($f); echo "written\n"; } else { echo "denied\n"; }
}
