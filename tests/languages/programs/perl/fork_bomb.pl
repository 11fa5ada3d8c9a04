# Probe: fork sleeping children without bound; when fork fails, "contained".
for my $i (1 .. 100000) {
    my $pid = fork();
    if (!defined $pid) { print "contained\n"; exit 0; }
    if ($pid == 0) { close STDOUT; close STDERR; sleep 5; exit 0; }
}
print "not contained\n";
exit 1;
