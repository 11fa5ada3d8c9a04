console.log([...process.argv[2]].reverse().join(""));
