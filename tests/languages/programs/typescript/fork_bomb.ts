// Probe: spawn sleeping children without bound; when a spawn fails, "contained".
declare var require: any;
declare var process: any;
const { spawn } = require("child_process");
let reported = false;
const contained = (err: any, i: number) => {
  if (reported) return;
  reported = true;
  process.stderr.write(`spawn failed after ${i} children: ${err && err.message}\n`);
  process.stdout.write("contained\n", () => process.exit(0));
};
for (let i = 0; i < 100000 && !reported; i++) {
  let child: any;
  try {
    child = spawn("/bin/sleep", ["5"], { stdio: "ignore" });
  } catch (err) {
    contained(err, i);
    break;
  }
  child.on("error", (err: any) => contained(err, i));
  child.unref();
  if (child.pid === undefined) break;
}
if (!reported) setTimeout(() => { if (!reported) { console.log("not contained"); process.exit(1); } }, 1000);
