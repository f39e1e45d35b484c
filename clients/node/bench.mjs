// @ts-check
// The client's cost per call: N sequential `session/get` through ConvoClient against the
// same frames written straight on the child's stdio (LSP framing, a minimal parser), each
// on its own convo process. Prints the median round trip of each and the difference.
//
//   node bench.mjs [path/to/convo] [N=2000]      (after `npm run build`)
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { ConvoClient } from "convo";

const binary = process.argv[2] ?? process.env.CONVO_BINARY ?? fileURLToPath(new URL("../../target/release/convo", import.meta.url));
const n = Number(process.argv[3] ?? 2000);
const warmup = Math.min(200, n);

/** @param {number[]} xs */
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
/** @param {number} ns */
const us = (ns) => (ns / 1000).toFixed(1);

/** A convo child spoken to with raw LSP frames: `call()` writes one request and resolves
 * with its reply, `end()` closes its input and waits for it to exit. */
async function rawPipe() {
  const child = spawn(binary, ["--store", "memory"], { stdio: ["pipe", "pipe", "inherit"] });
  let buffer = Buffer.alloc(0);
  /** @type {((message: unknown) => void) | undefined} */
  let waiting;
  child.stdout.on("data", (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, end).toString())?.[1]);
      if (buffer.length < end + 4 + length) return;
      const message = JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString());
      buffer = buffer.subarray(end + 4 + length);
      waiting?.(message);
    }
  });
  let id = 0;
  return {
    /** @param {string} method @param {object} params */
    call: (method, params) =>
      new Promise((resolve) => {
        waiting = resolve;
        const body = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: ++id, method, params }));
        child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
        child.stdin.write(body);
      }),
    end: async () => {
      child.stdin.end();
      await new Promise((r) => child.on("close", r));
    },
  };
}

/** This process's CPU time, in nanoseconds. */
const cpu = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
};

/**
 * Nanoseconds of each of `count` sequential calls of `call`; adds the CPU time this
 * process spent on them to `spent.ns`.
 * @param {() => Promise<unknown>} call @param {number} count @param {{ns: number}} spent
 */
async function time(call, count, spent) {
  const times = [];
  const before = cpu();
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    await call();
    times.push(Number(process.hrtime.bigint() - start));
  }
  spent.ns += cpu() - before;
  return times;
}

const raw = await rawPipe();
const client = await ConvoClient.start({ binary, store: "memory" });
await raw.call("session/create", { session_id: "bench" });
await client.createSession({ session_id: "bench" });
const rawGet = () => raw.call("session/get", { session_id: "bench" });
const clientGet = () => client.getSession({ session_id: "bench" });
await time(rawGet, warmup, { ns: 0 });
await time(clientGet, warmup, { ns: 0 });
// Alternate in rounds, so that a slower stretch of the machine weighs on both alike.
const rounds = 10;
/** @type {number[]} */ const rawTimes = [];
/** @type {number[]} */ const clientTimes = [];
const rawCpu = { ns: 0 };
const clientCpu = { ns: 0 };
for (let r = 0; r < rounds; r++) {
  rawTimes.push(...(await time(rawGet, Math.ceil(n / rounds), rawCpu)));
  clientTimes.push(...(await time(clientGet, Math.ceil(n / rounds), clientCpu)));
}
await raw.end();
await client.dispose();

const pipe = median(rawTimes);
const typed = median(clientTimes);
const perCall = (/** @type {{ns: number}} */ c) => us(c.ns / rawTimes.length);
console.log(`session/get, ${rawTimes.length} sequential calls each (median round trip; this process's CPU per call):`);
console.log(`  raw pipe frames   ${us(pipe).padStart(7)} µs   ${perCall(rawCpu).padStart(6)} µs CPU`);
console.log(`  ConvoClient       ${us(typed).padStart(7)} µs   ${perCall(clientCpu).padStart(6)} µs CPU`);
console.log(`  client overhead   ${us(typed - pipe).padStart(7)} µs per call (median)`);
