<?php
// Probe: TCP to 1.1.1.1:53 and 127.0.0.1:9 (2 s timeout each).
$a = @fsockopen("1.1.1.1", 53, $errno, $error, 2);
$b = @fsockopen("127.0.0.1", 9, $errno, $error, 2);
echo ($a || $b) ? "reachable\n" : "unreachable\n";
