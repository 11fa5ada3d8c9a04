// Crashes: calls a method of undefined (uncaught TypeError).
const input = require("fs").readFileSync(0, "utf8");
const totals = {};
for (const word of input.split(/\s+/)) {
  if (word !== "") totals.sum.add(Number(word));
}
console.log(totals.sum.value());
