// Probe: TCP to 1.1.1.1:53 and 127.0.0.1:9 (2 s timeout each).
declare var require: any;
const net = require("net");
function tryConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port });
    const done = (ok: boolean) => { sock.destroy(); resolve(ok); };
    sock.setTimeout(2000, () => done(false));
    sock.once("connect", () => done(true));
    sock.once("error", () => done(false));
  });
}
(async () => {
  const a = await tryConnect("1.1.1.1", 53);
  const b = await tryConnect("127.0.0.1", 9);
  console.log(a || b ? "reachable" : "unreachable");
})();
