/**
 * The convo process: spawned with piped stdio, its stderr split into lines for the
 * logger (the last few kept for error messages), killed when the host process exits, and
 * unreferenced while no call is in flight so that a host that never disposes its client
 * still exits.
 */
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { createInterface } from "node:readline";
import type { Readable, Writable } from "node:stream";

export type Logger = (line: string) => void;

/** How the process ended: `code` and `signal` as Node reports them, `error` when it could
 * not be started at all. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: Error;
}

const live = new Set<ChildProcessByStdio<Writable, Readable, Readable>>();
let hooked = false;

/** Kills every convo child still running when the host process exits. Installed once. */
function hookHostExit(): void {
  if (hooked) return;
  hooked = true;
  process.once("exit", () => {
    for (const child of live) child.kill();
  });
}

const TAIL = 20;

export class Child {
  readonly process: ChildProcessByStdio<Writable, Readable, Readable>;
  /** Settles once the process has ended and its pipes are closed. */
  readonly exited: Promise<Exit>;
  readonly #tail: string[] = [];
  #busy = 0;

  constructor(binary: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; cwd?: string; logger: Logger | null }) {
    this.process = spawn(binary, args, { stdio: ["pipe", "pipe", "pipe"], env: options.env, cwd: options.cwd, windowsHide: true });
    const child = this.process;
    live.add(child);
    hookHostExit();
    const logger = options.logger;
    createInterface({ input: child.stderr, crlfDelay: Infinity }).on("line", (line) => {
      this.#tail.push(line);
      if (this.#tail.length > TAIL) this.#tail.shift();
      logger?.(line);
    });
    // A write to a child that has died fails with EPIPE; the exit below reports it.
    child.stdin.on("error", () => {});
    this.exited = new Promise<Exit>((resolve) => {
      child.once("error", (error) => {
        // spawn failed (ENOENT, EACCES, …): there is no process and may be no 'close'.
        if (child.pid === undefined) resolve({ code: null, signal: null, error });
      });
      child.once("close", (code, signal) => resolve({ code, signal }));
    }).finally(() => live.delete(child));
    this.#release();
  }

  /** The last lines convo wrote to stderr (at most 20). */
  get stderrTail(): readonly string[] {
    return this.#tail;
  }

  /** Keeps the host's event loop alive while `delta` > 0 calls are in flight. */
  hold(delta: 1 | -1): void {
    this.#busy += delta;
    if (this.#busy === 1 && delta === 1) this.#handles().forEach((h) => h.ref?.());
    else if (this.#busy === 0) this.#release();
  }

  #release(): void {
    this.#handles().forEach((h) => h.unref?.());
  }

  #handles(): Array<{ ref?(): void; unref?(): void }> {
    const c = this.process;
    return [c, c.stdin, c.stdout, c.stderr] as Array<{ ref?(): void; unref?(): void }>;
  }
}
