// Probe: spawn copies of node (process.execPath) without bound; the copies
// just sleep. When a spawn fails (pids limit), print "contained" and exit 0.
'use strict';
const { spawn } = require('child_process');

if (process.argv[2] === 'child') {
  setTimeout(() => {}, 5000);
} else {
  let contained = (err, i) => {
    contained = () => {};
    process.stderr.write(`spawn failed after ${i} children: ${err && err.message}\n`);
    process.stdout.write('contained\n', () => process.exit(0));
  };
  for (let i = 0; i < 100000; i++) {
    let child;
    try {
      child = spawn(process.execPath,
        ['--v8-pool-size=1', '--max-old-space-size=16', process.argv[1], 'child'],
        { stdio: 'ignore' });
    } catch (err) {
      contained(err, i);
      return;
    }
    child.on('error', (err) => contained(err, i));
    child.unref();
    if (child.pid === undefined) {
      // spawn failed; the 'error' event is delivered on the next tick.
      return;
    }
  }
  process.stdout.write('not contained\n', () => process.exit(1));
}
