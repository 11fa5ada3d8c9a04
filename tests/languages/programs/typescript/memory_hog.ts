// Probe: keep 16 MiB arrays without bound (V8's heap cap may end it first).
const keep: number[][] = [];
for (let n = 0; ; n++) { keep.push(new Array(2 * 1024 * 1024).fill(n & 0xffff)); }
