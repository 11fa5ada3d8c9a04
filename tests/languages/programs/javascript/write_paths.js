// Probe: try to open for writing (append, create) argv[1] (process.argv[2]),
// /build/probe and /etc/probe; print "denied" or "written" for each, in that
// order.
'use strict';
const fs = require('fs');

function attempt(path) {
  try {
    fs.closeSync(fs.openSync(path, 'a'));
    console.log('written');
  } catch (e) {
    console.log('denied');
  }
}

attempt(process.argv[2] || '');
attempt('/build/probe');
attempt('/etc/probe');
