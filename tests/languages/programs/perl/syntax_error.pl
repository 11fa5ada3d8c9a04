# Does not parse: perl exits 255.
my $x = ;
