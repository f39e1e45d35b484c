// The unit tests' shared parts: the bundle of the extension's pure code (dist/lib.cjs, built
// by build.mjs) and a convo client on the binary of CONVO_BINARY, with a store of its own.
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const lib = createRequire(import.meta.url)("../../dist/lib.cjs");

export const binary = process.env.CONVO_BINARY;
if (!binary) throw new Error("CONVO_BINARY must name the convo binary to test against");

/** A started client on a fresh SQLite store (or `memory`), and a function that ends it. */
export async function startClient(store) {
  const dir = mkdtempSync(join(tmpdir(), "convo-vscode-unit-"));
  const client = await lib.ConvoClient.start({ binary, store: store ?? `sqlite:${join(dir, "store.db")}`, logger: null });
  return {
    client,
    dir,
    async end() {
      await client.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
