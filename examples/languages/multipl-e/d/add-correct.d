import std.math;
import std.typecons;
/*
Add two numbers x and y
>>> add(2L, 3L)
5L
>>> add(5L, 7L)
12L
*/
long add(long x, long y) 
{
    return x + y;
}
unittest
{
    alias candidate = add;

    assert(candidate(0L, 1L) == 1L);
    assert(candidate(1L, 0L) == 1L);
    assert(candidate(2L, 3L) == 5L);
    assert(candidate(5L, 7L) == 12L);
    assert(candidate(7L, 5L) == 12L);
}
void main(){}