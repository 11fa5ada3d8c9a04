// Probe: spin forever on the CPU.
'use strict';
let counter = 0;
for (;;) {
  counter = (counter + 1) | 0;
}
