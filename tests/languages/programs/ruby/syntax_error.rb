# Does not parse: ruby exits 1.
def f(; end
