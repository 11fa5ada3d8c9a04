# Does not parse: bash exits 2.
if then fi
