// Probe: copy stdin to stdout unchanged, then print each argument on its own
// line to stderr. (Node decodes argv as UTF-8, so only valid UTF-8 arguments
// round-trip byte-exactly.)
'use strict';
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  process.stdout.write(Buffer.concat(chunks), () => {
    for (const a of process.argv.slice(2)) process.stderr.write(a + '\n');
  });
});
