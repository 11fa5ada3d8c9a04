<?php
// Probe: fork sleeping children without bound; when fork fails, "contained".
for ($i = 0; $i < 100000; $i++) {
    $pid = @pcntl_fork();
    if ($pid < 0) { echo "contained\n"; exit(0); }
    if ($pid == 0) { fclose(STDOUT); sleep(5); exit(0); }
}
echo "not contained\n";
exit(1);
