// @ts-check
// What the tests share: the binary under test and a client started on it.
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ConvoClient } from "convo";

/** The binary under test: CONVO_BINARY, else the repository's release build. */
export const BINARY = process.env.CONVO_BINARY ?? fileURLToPath(new URL("../../../target/release/convo", import.meta.url));
if (!existsSync(BINARY)) throw new Error(`no convo binary at ${BINARY}: build it, or set CONVO_BINARY`);

/**
 * A client on an in-memory store whose stderr lines are collected in `lines`.
 * @param {import("convo").ConvoOptions} [options]
 */
export async function start(options = {}) {
  /** @type {string[]} */
  const lines = [];
  const client = await ConvoClient.start({ binary: BINARY, store: "memory", logger: (l) => lines.push(l), ...options });
  return Object.assign(client, { lines });
}

/**
 * Whether a process with this id runs. A zombie does not: a child whose host died is
 * reaped by whatever PID 1 is, which in a container may take a while.
 * @param {number} pid
 */
export function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return /** @type {NodeJS.ErrnoException} */ (e).code !== "ESRCH";
  }
  if (process.platform !== "linux") return true;
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false; // gone between the two looks
  }
}

/** Resolves once `check()` holds, polling; rejects after `ms` (a deadline, not a measurement:
 * CI runs this beside other suites on two busy cores). @param {() => boolean} check */
export async function eventually(check, ms = 30_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A promise and the functions that settle it. @template T */
export function deferred() {
  /** @type {(value: T) => void} */ let resolve = () => {};
  /** @type {(reason: unknown) => void} */ let reject = () => {};
  /** @type {Promise<T>} */
  const promise = new Promise((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}
