<?php
// Probe: keep 1 MiB strings without bound (the cli has no memory_limit).
$keep = [];
while (true) { $keep[] = str_repeat("x", 1 << 20) . count($keep); }
