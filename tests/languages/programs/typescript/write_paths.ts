// Probe: open argv[1], /build/probe and /etc/probe for appending.
declare var require: any;
declare var process: any;
const fs = require("fs");
for (const p of [process.argv[2] || "", "/build/probe", "/etc/probe"]) {
  try {
    fs.closeSync(fs.openSync(p, "a"));
    console.log("written");
  } catch (e) {
    console.log("denied");
  }
}
