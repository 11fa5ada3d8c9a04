const input = require("fs").readFileSync(0, "utf8");
let total = 0n;
for (const word of input.split(/\s+/)) {
  if (word !== "") total += BigInt(word);
}
console.log(total.toString());
