// Probe: allocate and touch memory without bound.
// Allocates plain JS arrays (16 MiB each, filled so every page is touched)
// on the V8 heap and keeps them alive, so V8's heap limit is the runtime limit
// in play. Expected outcome depends on the cap: node v18.20.4 (bookworm) ran
// with a V8 heap limit of ~259 MiB under both a 256 MiB and a 512 MiB cap.
//   - 256 MiB cap: the container's memory cap fires first; observed SIGKILL,
//     exit 137, OOMKilled=true.
//   - 512 MiB cap: V8's limit fires first; observed "FATAL ERROR: Reached heap
//     limit Allocation failed - JavaScript heap out of memory" on stderr and
//     exit 139 (node crashes while aborting), OOMKilled=false.
'use strict';
const CHUNK_ELEMS = 2 * 1024 * 1024; // 2 Mi small integers = 16 MiB
const keep = [];
for (let n = 0; ; n++) {
  const a = new Array(CHUNK_ELEMS).fill(n & 0xffff);
  keep.push(a);
}
