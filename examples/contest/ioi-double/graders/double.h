// ioi-double: the contestant implements twice().
#pragma once
long long twice(long long x);
