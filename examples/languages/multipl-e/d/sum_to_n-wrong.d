import std.math;
import std.typecons;
/*
sum_to_n is a function that sums numbers from 1 to n.
>>> sum_to_n(30L)
465L
>>> sum_to_n(100L)
5050L
>>> sum_to_n(5L)
15L
>>> sum_to_n(10L)
55L
>>> sum_to_n(1L)
1L
*/
long sum_to_n(long n) 
{
    return n * (n - 1) / 2;
}
unittest
{
    alias candidate = sum_to_n;

    assert(candidate(1L) == 1L);
    assert(candidate(6L) == 21L);
    assert(candidate(11L) == 66L);
    assert(candidate(30L) == 465L);
    assert(candidate(100L) == 5050L);
}
void main(){}