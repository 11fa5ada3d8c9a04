// Wrong: concatenates the numbers as strings.
const input = require("fs").readFileSync(0, "utf8");
let total = "";
for (const word of input.split(/\s+/)) {
  if (word !== "") total += word;
}
console.log(total === "" ? "0" : total);
