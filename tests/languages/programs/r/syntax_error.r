# Does not parse: Rscript exits 1.
x <- )
